import { defineConfig } from 'tsdown'

export default defineConfig({
  entry: ['src/index.ts'],
  external: [
    /^@tollgate\/core/,
    /^@tollgate\/http/,
    /^graphql/,
    /^@envelop/,
    /^@apollo/,
    /^mercurius/,
    /^fastify/,
  ],
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  platform: 'neutral',
  target: 'es2022',
})
