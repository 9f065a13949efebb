// Package workflow runs skill.yaml workflows (seed 004): inputs are validated, steps run
// in order, each step's result is bound to its id (and its output name) for the
// templates, conditions and compute blocks of the steps after it, and the outputs are
// rendered at the end. It is pure Go with no NATS inside: the worker passes a Hooks
// value that turns step progress into events.
//
// Failures carry a class (package failure): a tool's own class, Repairable for
// template and reference errors, Fatal for invalid inputs. on_error decides what a
// failing step does: fail (default) ends the run with the step's error; continue binds
// nothing to the step and goes on; retry:N calls a retryable step again up to N times
// at once before failing (longer retries belong to the broker: see package worker).
package workflow
