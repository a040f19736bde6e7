#!/usr/bin/env node
// The published package runs the built dist; inside the repository, run it with `node --import tsx`.
import { existsSync } from 'node:fs'

const dist = new URL('../dist/index.js', import.meta.url)
const { run } = await import(existsSync(dist) ? dist.href : new URL('../src/index.ts', import.meta.url).href)
process.exitCode = await run(process.argv.slice(2))
