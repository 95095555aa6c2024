// One way to replace a file so that a reader (or a crash, or a power loss)
// sees either the old content or the new, never a mix: write a temporary file
// with a unique name beside the target, fsync it, rename it over the target,
// then fsync the folder so the rename itself is durable. On any failure the
// temporary file is removed and the target is untouched.
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';

function tempNameFor(file) {
  // pid + random: two processes, or two writes in one process, never share one.
  return join(dirname(file), `.${basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
}

export function syncFolder(folder) {
  // Not every platform lets a folder be opened for fsync (Windows): best effort.
  let fd;
  try {
    fd = openSync(folder, 'r');
    fsyncSync(fd);
  } catch {
    // the rename is still atomic; only its durability across power loss is weaker here
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Replaces `file` with `data` atomically and durably (synchronous). */
export function writeFileAtomicSync(file, data, { mode } = {}) {
  const tmp = tempNameFor(file);
  let fd;
  try {
    fd = openSync(tmp, 'wx', mode ?? 0o644);
    writeSync(fd, typeof data === 'string' ? data : Buffer.from(data));
    fsyncSync(fd);
    closeSync(fd);
    fd = undefined;
    renameSync(tmp, file);
  } catch (err) {
    if (fd !== undefined) closeSync(fd);
    rmSync(tmp, { force: true });
    throw err;
  }
  syncFolder(dirname(file));
}

/** Replaces `file` with `data` atomically and durably. */
export async function writeFileAtomic(file, data, { mode } = {}) {
  const tmp = tempNameFor(file);
  let handle;
  try {
    handle = await open(tmp, 'wx', mode ?? 0o644);
    await handle.writeFile(data);
    await handle.sync();
    await handle.close();
    handle = undefined;
    await rename(tmp, file);
  } catch (err) {
    if (handle) await handle.close().catch(() => {});
    await rm(tmp, { force: true });
    throw err;
  }
  syncFolder(dirname(file));
}
