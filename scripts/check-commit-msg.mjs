#!/usr/bin/env node
/**
 * The commit-msg hook (.githooks/commit-msg): a subject of at most 72 characters in the form
 * `area: what changed`, the area one of scripts/commit-areas.json. Merge commits and git's own
 * fixup!/squash!/amend! subjects pass as they are, since git writes them.
 *
 *   node scripts/check-commit-msg.mjs <message file>     exit 1 with the reason when the subject is wrong
 */
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
export const AREAS = JSON.parse(fs.readFileSync(path.join(here, 'commit-areas.json'), 'utf8'))
export const MAX_SUBJECT = 72

/** The subject of a commit message as git will record it: the first line that is not a comment. */
export function subjectOf(message) {
  const lines = message.split('\n').filter((line) => !line.startsWith('#'))
  return (lines.find((line) => line.trim() !== '') ?? '').trimEnd()
}

/** Why a subject is refused, or undefined when it is fine. */
export function checkSubject(subject) {
  if (/^Merge /.test(subject) || /^(fixup|squash|amend)! /.test(subject)) return undefined
  if (subject === '') return 'the subject is empty'
  if (subject.length > MAX_SUBJECT) {
    return `the subject has ${subject.length} characters; at most ${MAX_SUBJECT}`
  }
  const m = /^([a-z-]+): (\S.*)$/.exec(subject)
  if (!m) return 'the subject is not of the form `area: what changed`'
  if (!AREAS.includes(m[1])) return `"${m[1]}" is not an area; one of: ${AREAS.join(', ')}`
  return undefined
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const file = process.argv[2]
  if (!file) {
    console.error('usage: check-commit-msg.mjs <message file>')
    process.exit(2)
  }
  const subject = subjectOf(fs.readFileSync(file, 'utf8'))
  const problem = checkSubject(subject)
  if (problem) {
    console.error(`commit-msg: ${problem}\n  subject: ${subject}\n  (areas and form: CONTRIBUTING.md)`)
    process.exit(1)
  }
}
