import { describeHttpAdapter } from '@tollgate/testkit/http-suite'
import express from 'express'
import express4 from 'express4'
import { expressFactory } from './factory'

describeHttpAdapter('express 5', expressFactory(express as any))
describeHttpAdapter('express 4', expressFactory(express4 as any))
