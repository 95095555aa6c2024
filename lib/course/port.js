// The PORT a learner's program gets when they try it by hand: `run` gives it
// (or a free one when it is taken), `doctor` checks it is free, and `start`
// prints it in the line to try the program.
export const DEFAULT_PORT = 3000;
