#!/usr/bin/env node
// The published package holds only dist/; inside the repository the sources are there, and the bin runs
// them (with `node --import tsx`), whatever a build or a pack left in dist/.
import { existsSync } from 'node:fs'

const src = new URL('../src/index.ts', import.meta.url)
const { run } = await import(existsSync(src) ? src.href : new URL('../dist/index.js', import.meta.url).href)
process.exitCode = await run(process.argv.slice(2))
