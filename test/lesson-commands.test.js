// The commands a lesson text prints paste in any folder (README: "Paste them
// in any folder of your workspace"): each "try it by hand" block that starts
// a program begins with a cd to the folder it needs, rendered as a whole
// path, and each "let the verifier check it" line names the lesson and no
// file, so the lesson's own file is taken wherever it is typed. Pasted here
// from the folder above the workspace, from the workspace and from another
// lesson's folder.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadLessons } from '../lib/manifest.js';
import { fileFrom } from '../lib/cli/lesson-arg.js';
import { runCli, tempDir, removeDir } from './helpers/cli.js';

const lessons = loadLessons();
const shBlocks = (text) => [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map(([, body]) => body);
// A block that runs the learner's program (or PM2 on its ecosystem file), in
// its code rather than in a comment.
const startsProgram = (block) => block.split('\n').some((line) => /\bnode server\.js\b|pm2-runtime start/.test(line.replace(/#.*$/, '')));

test.each(lessons.map((l) => [l.id, l]))('%s: every block that runs the program begins with a cd, and its verify line names no file', (id, lesson) => {
  const text = readFileSync(lesson.paths.text, 'utf8');
  const running = shBlocks(text).filter(startsProgram);
  expect(running.length).toBeGreaterThan(0);
  for (const block of running) expect({ block, first: block.split('\n')[0] }).toEqual({ block, first: expect.stringMatching(/^cd \{\{(lesson-folder|workspace)\}\}/) });
  const verifyLines = text.split('\n').filter((line) => line.includes('{{cli}} verify'));
  expect(verifyLines.length).toBeGreaterThan(0);
  for (const line of verifyLines) expect(line).toMatch(new RegExp(`\\{\\{cli\\}\\} verify ${id}(?=$|[\\s\`])(?! +\\S+\\.[cm]?js)`));
});

describe('pasted from the folder above the workspace, the workspace, and another lesson\'s folder', () => {
  let top;
  let workspace;
  beforeAll(async () => {
    top = tempDir();
    for (const lesson of lessons) expect((await runCli(['start', lesson.id], { cwd: top })).code).toBe(0);
    workspace = join(top, 'cluster-workshop');
  });
  afterAll(() => removeDir(top));

  const folders = () => [top, workspace, join(workspace, 'fork')];

  test.each(lessons.map((l) => [l.id, l]))('%s: its cd lines reach the folder with the program, and its verify line takes the lesson\'s file', async (id, lesson) => {
    for (const cwd of folders()) {
      const printed = await runCli(['print', id], { cwd, env: { NO_COLOR: '1' } });
      expect(printed.code).toBe(0);
      expect(printed.stdout).not.toContain('{{');
      const cds = printed.stdout.split('\n').map((l) => l.trim()).filter((l) => /^cd \S/.test(l)).map((l) => l.replace(/\s+#.*$/, ''));
      expect(cds.length).toBeGreaterThan(0);
      for (const cd of cds) {
        // The cd as pasted, then what the block runs next: the program's file is there.
        const r = spawnSync('bash', ['-c', `${cd} && pwd && ls`], { cwd, encoding: 'utf8' });
        expect({ cd, cwd, code: r.status, err: r.stderr }).toEqual({ cd, cwd, code: 0, err: '' });
        expect(r.stdout).toMatch(/^(server\.js|package\.json)$/m);
      }
      // `verify <id>` with no file: the file the verifier takes from here.
      expect(fileFrom(lesson, undefined, { cwd, env: {} })).toBe(join(workspace, id, 'server.js'));
      expect(existsSync(join(workspace, id, 'server.js'))).toBe(true);
    }
  });
});
