import { describeObservability } from '@tollgate/testkit/observability-suite'
import express from 'express'
import express4 from 'express4'
import { expressFactory } from './factory'

describeObservability('express 5', expressFactory(express as any))
describeObservability('express 4', expressFactory(express4 as any))
