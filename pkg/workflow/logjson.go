package workflow

//go:generate go run ../../internal/cmd/jsongen -encode *Log

// Every outcome a worker publishes carries its log, so Log encodes itself
// (AppendJSON, JSONSize) byte for byte as json.Marshal writes it, without its
// reflection: the code is generated from the fields and json tags of Log and
// StepLog (zz_generated_json.go; run `make generate` after changing a field).
