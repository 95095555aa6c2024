// Preloaded with --import: installs the resolve hook of module-fallback-hooks.js.
import { register } from 'node:module';

register('./module-fallback-hooks.js', import.meta.url, {
  data: { fallbackParent: new URL('../../package.json', import.meta.url).href },
});
