package events

//go:generate go run ../internal/cmd/jsongen -encode Job,JobRoute,ExecutionCompleted,ExecutionFailed,ExecutionFallback -decode Job

// The types every execution publishes (a job, its route, its outcomes) encode
// themselves with AppendJSON instead of going through encoding/json's reflection,
// which on the hot path costs more than the rest of building the message
// (measured against the JSON v2 engine too: a job takes 1.6 to 2 times as long,
// and a completed execution 8 allocations more, for its outputs' map); and a
// worker decodes its jobs without it (DecodeJob). The code is generated from the
// types' fields and json tags (zz_generated_json.go, by internal/cmd/jsongen: run
// `make generate` after changing a field). Its output is byte for byte what
// json.Marshal writes for the same value — HTML-safe escaping, sorted map keys,
// omitempty, compacted raw messages, the same float format — and AppendJSON fails
// where json.Marshal fails, so readers cannot tell the two apart.
