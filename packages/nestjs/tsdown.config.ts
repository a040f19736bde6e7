import { defineConfig } from 'tsdown'

export default defineConfig({
  // One output per package.json `exports` entry: `websockets` alone needs @nestjs/websockets.
  entry: { index: 'src/index.ts', websockets: 'src/websockets.ts' },
  external: [/^@tollgate\/(core|http|websocket)/, /^@nestjs\//],
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  platform: 'neutral',
  target: 'es2022',
})
