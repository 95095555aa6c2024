// A lesson's hints, one at a time and in order, the one about the step the
// last verify failed at first. Which hints were shown is kept in progress
// (by text, so a reordered manifest keeps them); after the last, they start
// again from the first.
import { hintsFor } from '../manifest.js';

/**
 * Picks the next hint and records it as shown.
 * @returns {null | { hint: { text: string, steps?: string[] }, number: number, total: number,
 *   failedStep: string | null, aboutFailedStep: boolean, startedOver: boolean, warnings: string[] }}
 *   null when the lesson has no hints
 */
export function nextHint(lesson, progress) {
  const failedStep = progress.lastFailedStep(lesson.id);
  const hints = hintsFor(lesson, failedStep);
  if (hints.length === 0) return null;
  let shown = progress.hintsShown(lesson.id).filter((t) => hints.some((h) => h.text === t));
  const startedOver = shown.length >= hints.length;
  if (startedOver) {
    progress.clearHints(lesson.id);
    shown = [];
  }
  const hint = hints.find((h) => !shown.includes(h.text));
  progress.recordHint(lesson.id, hint.text);
  progress.save();
  return {
    hint,
    number: shown.length + 1,
    total: hints.length,
    failedStep,
    aboutFailedStep: Boolean(failedStep && hint.steps?.includes(failedStep)),
    startedOver,
    warnings: progress.warnings,
  };
}

/** Every hint of the lesson, in the order nextHint gives them (nothing recorded). */
export function allHints(lesson, progress) {
  return hintsFor(lesson, progress.lastFailedStep(lesson.id));
}
