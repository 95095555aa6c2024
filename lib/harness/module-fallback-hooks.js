// ESM resolve hook: a bare specifier (express) that cannot be found from the
// learner's file is looked up again from the workshop package.
let fallbackParent;

export function initialize(data) {
  fallbackParent = data.fallbackParent;
}

const isBare = (s) => !/^(\.{0,2}\/|[a-z][a-z0-9+.-]*:)/i.test(s);

export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (err) {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !isBare(specifier) || !fallbackParent) throw err;
    return next(specifier, { ...context, parentURL: fallbackParent });
  }
}
