package events

// Trigger types that skillbus's own clients send. They are inputs to the router, not
// events skillbus writes, so they have no data schema in the catalog: a trigger's data
// is whatever its sender puts there.
const (
	// TriggerInvoke is the type `skillbus trigger --skill` and the Go client give a
	// trigger that invokes one skill by name when the caller names no type.
	TriggerInvoke = Prefix + "invoke"
)
