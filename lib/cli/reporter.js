// How a verify run is shown. The text reporter writes the step log as it
// happens: each line carries the step's prefix, the learner's output comes
// under its own prefix. The JSON reporter stays silent and the caller prints
// the report.
import { makeStyle } from './style.js';

// Learner output relayed per step before the rest is only counted: a program
// that floods its logs must not flood the verdict.
const RELAY_LIMIT = 40;
// A step that runs longer than this gets a spinner line (live reporters only).
const SPINNER_DELAY_MS = 500;
const SPINNER_FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

export class TextReporter {
  /**
   * live: the output is a terminal, so a step that runs longer than half a
   * second shows a spinner line (erased before the next line). Never for
   * --json, pipes or logs.
   */
  constructor({ write = (s) => process.stdout.write(s), color = false, relayOutput = true, live = false, columns = () => process.stdout.columns } = {}) {
    this.write = write;
    this.live = live;
    this.columns = columns;
    this.spinnerShown = false;
    this.style = makeStyle(color);
    this.relayOutput = relayOutput;
    this.prefix = 'verify';
    this.relayed = 0;
    this.suppressed = 0;
  }

  line(text) {
    this.clearSpinner();
    this.write(`${text}\n`);
  }

  startSpinner(label) {
    this.stopSpinner();
    if (!this.live) return;
    const started = performance.now();
    let frame = 0;
    const draw = () => {
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      const room = Math.max(10, (this.columns() || 80) - seconds.length - 6);
      const text = label.length > room ? `${label.slice(0, room - 1)}…` : label;
      this.write(`\r\x1b[2K${this.style.cyan(SPINNER_FRAMES[frame++ % SPINNER_FRAMES.length])} ${text} ${this.style.dim(`${seconds} s`)}`);
      this.spinnerShown = true;
    };
    this.spinnerDelay = setTimeout(() => {
      draw();
      this.spinnerTimer = setInterval(draw, 100);
      this.spinnerTimer.unref?.();
    }, SPINNER_DELAY_MS);
    this.spinnerDelay.unref?.();
  }

  clearSpinner() {
    if (!this.spinnerShown) return;
    this.spinnerShown = false;
    this.write('\r\x1b[2K');
  }

  stopSpinner() {
    clearTimeout(this.spinnerDelay);
    clearInterval(this.spinnerTimer);
    this.spinnerDelay = this.spinnerTimer = undefined;
    this.clearSpinner();
  }

  begin({ lesson, file, steps }) {
    this.line(this.style.bold(`Verifying lesson ${lesson.number} "${lesson.title}" (${steps.length} steps)`));
    this.line(this.style.dim(`file: ${file}`));
  }

  note(text) {
    this.line(this.style.dim(`[${this.prefix}] ${text}`));
  }

  stepStart(step, index, total) {
    this.flushSuppressed();
    this.prefix = step.id;
    this.relayed = 0;
    this.line(this.style.cyan(`[${step.id}] step ${index + 1}/${total}: ${step.title}`));
    this.startSpinner(`step ${index + 1}/${total}: ${step.title}`);
  }

  stepLog(message) {
    this.line(`${this.style.cyan(`[${this.prefix}]`)} ${message}`);
  }

  programLine(stream, line) {
    if (!this.relayOutput) return;
    if (this.relayed >= RELAY_LIMIT) {
      this.suppressed += 1;
      return;
    }
    this.relayed += 1;
    const tag = stream === 'stderr' ? this.style.yellow('[your program]') : this.style.dim('[your program]');
    this.line(`${tag} ${line}`);
  }

  flushSuppressed() {
    if (this.suppressed > 0) {
      this.line(this.style.dim(`[your program] ... ${this.suppressed} more lines not shown`));
      this.suppressed = 0;
    }
  }

  stepEnd(entry) {
    this.stopSpinner();
    this.flushSuppressed();
    if (entry.passed) {
      this.line(`${this.style.cyan(`[${entry.id}]`)} ${this.style.green('✓ passed')} ${this.style.dim(`(${entry.durationMs} ms)`)}`);
    } else {
      this.line(`${this.style.cyan(`[${entry.id}]`)} ${this.style.red('✗ failed')} ${this.style.dim(`(${entry.durationMs} ms)`)}`);
      for (const l of entry.detail.split('\n')) this.line(`  ${l}`);
    }
  }

  end(report) {
    this.stopSpinner();
    const seconds = (report.durationMs / 1000).toFixed(1);
    if (report.passed) {
      this.line(this.style.green(this.style.bold(`PASSED: all ${report.steps.length} steps held (${seconds} s).`)));
    } else if (report.interrupted) {
      this.line(this.style.yellow(`Interrupted (${report.interrupted}); your program was stopped.`));
    } else {
      const failed = report.steps.find((s) => !s.passed);
      this.line(this.style.red(this.style.bold(`FAILED at "${failed?.name}" (${seconds} s). Fix what it says above and verify again.`)));
    }
  }
}

/** Collects nothing and prints nothing: the caller prints the JSON report. */
export class SilentReporter {
  begin() {}
  note() {}
  stepStart() {}
  stepLog() {}
  programLine() {}
  stepEnd() {}
  end() {}
}
