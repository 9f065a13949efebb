// Package flow evaluates a skill's flow-control expressions — its filter, its
// rate limit's key, its queue priority — over a trigger's CloudEvent. They are CEL expressions
// (cel.dev/cel-go): side-effect free, always terminating, type-checked when the
// skill is validated and compiled once per skill version.
//
// An expression reads the event through these variables:
//
//	id, type, source, subject, time   the CloudEvent attributes, strings ("" when absent)
//	data                              the event's data: JSON decoded (an object, a list,
//	                                  a number, ...), or the data as a string when it is
//	                                  not JSON
//	extensions                        extension attributes by name, strings:
//	                                  extensions.tenant or extensions["tenant"]; one
//	                                  the event lacks reads as ""
//
// A data field the event lacks is an error (no such key), as everywhere in CEL:
// test it first with has(data.field). Numbers compare across int and double (data.amount > 100 holds for 250.0), since
// JSON numbers decode as doubles. Every evaluation is bounded by a cost limit
// (CostLimit), so no expression can hold a router up however large the event: past
// it, evaluation stops with an error.
//
// The package imports no NATS and no CloudEvents package; the caller fills an
// Event from whatever it decoded.
package flow
