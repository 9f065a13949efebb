// Package events is the catalog of the CloudEvents skillbus writes: their type names,
// the Go types of their data payloads, and a JSON Schema for each (embedded, see Schema).
//
// Every event is a CloudEvents 1.0 event written to NATS in structured content mode: one
// JSON document holds the attributes and the data, with the header Content-Type:
// application/cloudevents+json. Binary-mode events (attributes as ce- headers) are read
// too: publishers of triggers send them. Besides the core attributes, skillbus events
// carry these extensions:
//
//	correlationid  the activation: every event caused by one trigger shares it
//	causationid    the id of the event that caused this one
//	executionid    the execution the event belongs to
//	traceparent    W3C trace context, continued at every hop
//	tracestate
//
// Ids are deterministic: an activation id is a hash of the trigger's
// source and id, an execution id adds the skill name. Re-publishing a trigger therefore
// names the same activation and executions, and JetStream's duplicate window drops the
// repeated publishes.
package events
