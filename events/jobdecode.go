package events

import (
	"encoding/json"
	"errors"
	"reflect"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/skillbus/skillbus/internal/jsondec"
	"github.com/skillbus/skillbus/internal/jsonx"
)

// DecodeJob decodes a job's data into j, as jsonx.Unmarshal (encoding/json's
// semantics) would: the same value, and an error exactly when it errs (its error).
//
// A worker decodes every job it runs, and the general decoder's reflection is a
// good part of that cost. So the shape skillbus writes — the lower-case keys of Job
// and its nested types, each once, in well-formed UTF-8 — is read by generated code
// (decodeJSON, see jsonenc.go), and anything else (a key in another case or
// unknown, a repeated key, a number that is not of its field's type, trailing
// data, a j not zero...) goes to jsonx.Unmarshal, whose result it then is.
func DecodeJob(data []byte, j *Job) error {
	if decodeJobFast(data, j, false) {
		return nil
	}
	return jsonx.Unmarshal(data, j)
}

// DecodeJobWithoutRoute is DecodeJob for a worker: it does not read the job's
// route, which a worker has no use for and which costs more to decode than the
// rest of the job, and leaves j.Route as it was. The route must be well-formed
// JSON, of any shape.
func DecodeJobWithoutRoute(data []byte, j *Job) error {
	if decodeJobFast(data, j, true) {
		return nil
	}
	return decodeJobWithoutRouteSlow(data, j)
}

// DecodeJobInPlace is DecodeJobWithoutRoute without its copy of data: the strings
// of the job decoded are slices of data, so data must never change from then on
// (its json.RawMessage fields are copies, as ever). A worker's job message is
// such data: nats.go gives every message it receives a buffer of its own, nothing
// writes to it, and the job keeps it for as long as it runs. The copy it saves
// is of the whole job, the route included, for every job a worker runs. A
// string of the job kept longer than the job (a cache's key) keeps the whole
// message alive: clone it there.
func DecodeJobInPlace(data []byte, j *Job) error {
	if !j.jsonIsZero() {
		return decodeJobWithoutRouteSlow(data, j)
	}
	d := jsondec.Over(data)
	if j.decodeJSON(&d, "route") && d.End() {
		return nil
	}
	*j = Job{}
	return decodeJobWithoutRouteSlow(data, j)
}

// decodeJobWithoutRouteSlow is DecodeJobWithoutRoute by jsonx.Unmarshal.
func decodeJobWithoutRouteSlow(data []byte, j *Job) error {
	err := jsonx.Unmarshal(data, &jobWithoutRoute{Job: j})
	// The error names the job's type as DecodeJob's does, not the wrapper's.
	var te *jsonv1.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Struct == "jobWithoutRoute" {
			te.Struct = "Job"
		}
		if te.Type == reflect.TypeFor[jobWithoutRoute]() {
			te.Type = reflect.TypeFor[Job]()
		}
	}
	return err
}

// jobWithoutRoute decodes into Job all but its route, which its own Route field,
// less deep than Job's, takes instead.
type jobWithoutRoute struct {
	*Job
	Route json.RawMessage `json:"route"`
}

// decodeJobFast decodes data into j with the generated decoder if j is zero; it
// reports whether it did. When it did not, j is left as it was. With skipRoute,
// a route member is checked to be well-formed and skipped.
func decodeJobFast(data []byte, j *Job, skipRoute bool) bool {
	if !j.jsonIsZero() {
		return false
	}
	// One copy of the document, and the strings decoded are slices of it: one
	// allocation rather than one per string, for a document no larger than the job
	// that keeps it.
	d := jsondec.New(data)
	skip := ""
	if skipRoute {
		skip = "route"
	}
	if j.decodeJSON(&d, skip) && d.End() {
		return true
	}
	*j = Job{}
	return false
}
