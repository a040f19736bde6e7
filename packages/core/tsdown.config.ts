import { defineConfig } from 'tsdown'

export default defineConfig({
  // One output per package.json `exports` entry; shared code goes to common chunks, so a class (an error
  // checked with `instanceof`) is the same class whichever entry it was imported from.
  entry: {
    index: 'src/index.ts',
    internal: 'src/entries/internal.ts',
    observability: 'src/entries/observability.ts',
    scripts: 'src/entries/scripts.ts',
  },
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  platform: 'neutral',
  target: 'es2022',
})
