import express from 'express'
import express4 from 'express4'
import { describeObservability } from '../../testkit/src/observability-suite'
import { expressFactory } from './factory'

describeObservability('express 5', expressFactory(express as any))
describeObservability('express 4', expressFactory(express4 as any))
