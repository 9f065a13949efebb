package events

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/skillbus/skillbus/internal/jsonenc"
)

// The types every execution publishes (a job, its route, its outcome) encode
// themselves with AppendJSON instead of going through encoding/json's reflection,
// which on the hot path costs more than the rest of building the message
// (measured against the JSON v2 engine too: a job takes 1.6 to 2 times as long,
// and a completed execution 8 allocations more, for its outputs' map). The
// output is byte for byte what json.Marshal writes for the same value — HTML-safe
// escaping, sorted map keys, omitempty, compacted raw messages, the same float
// format — and AppendJSON fails where json.Marshal fails, so readers cannot tell
// the two apart. The pieces (strings, numbers, raw messages, values of any type)
// come from internal/jsonenc, which hands a value of a type it does not know to
// json.Marshal. A field added to
// one of these types must be added to its AppendJSON as well: the tests compare
// every field with json.Marshal and fail until it is.

// AppendJSON appends j encoded as json.Marshal encodes it. On error it returns b
// as it was and the error json.Marshal would give.
func (j Job) AppendJSON(b []byte) ([]byte, error) {
	n := len(b)
	b, err := j.appendJSON(slices.Grow(b, j.size()))
	if err != nil {
		return b[:n], err
	}
	return b, nil
}

func (j *Job) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"execution_id":`...)
	b = jsonenc.AppendString(b, j.ExecutionID)
	b = append(b, `,"activation_id":`...)
	b = jsonenc.AppendString(b, j.ActivationID)
	b = append(b, `,"skill":`...)
	if b, err = j.Skill.appendJSON(b); err != nil {
		return b, err
	}
	if len(j.Inputs) != 0 {
		b = append(b, `,"inputs":`...)
		if b, err = jsonenc.AppendRaw(b, j.Inputs); err != nil {
			return b, err
		}
	}
	b = append(b, `,"trigger":`...)
	b = j.Trigger.appendJSON(b)
	if len(j.Fallback) != 0 {
		b = append(b, `,"fallback":`...)
		if b, err = appendSkillRefs(b, j.Fallback); err != nil {
			return b, err
		}
	}
	if len(j.History) != 0 {
		b = append(b, `,"history":`...)
		if b, err = jsonenc.AppendValue(b, j.History); err != nil {
			return b, err
		}
	}
	if len(j.Answers) != 0 {
		b = append(b, `,"answers":`...)
		if b, err = jsonenc.AppendValue(b, j.Answers); err != nil {
			return b, err
		}
	}
	if j.Depth != 0 {
		b = append(b, `,"depth":`...)
		b = strconv.AppendInt(b, int64(j.Depth), 10)
	}
	if j.Repair != nil {
		b = append(b, `,"repair":`...)
		if b, err = jsonenc.AppendValue(b, j.Repair); err != nil {
			return b, err
		}
	}
	if len(j.Together) != 0 {
		b = append(b, `,"together":`...)
		b = appendStringSlices(b, j.Together)
	}
	if j.Live {
		b = append(b, `,"live":true`...)
	}
	if j.Route != nil {
		b = append(b, `,"route":`...)
		if b, err = j.Route.appendJSON(b); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// AppendJSON appends r encoded as json.Marshal encodes it. On error it returns b
// as it was and the error json.Marshal would give.
func (r JobRoute) AppendJSON(b []byte) ([]byte, error) {
	n := len(b)
	b, err := r.appendJSON(slices.Grow(b, r.size()))
	if err != nil {
		return b[:n], err
	}
	return b, nil
}

func (r *JobRoute) appendJSON(b []byte) ([]byte, error) {
	var err error
	start := len(b) // every member starts with a comma; the first becomes the brace
	if r.Primary != nil {
		b = append(b, `,"primary":`...)
		if b, err = r.Primary.appendJSON(b); err != nil {
			return b, err
		}
	}
	if len(r.FallbackChain) != 0 {
		b = append(b, `,"fallback_chain":`...)
		if b, err = appendSkillRefs(b, r.FallbackChain); err != nil {
			return b, err
		}
	}
	if len(r.ParallelGroups) != 0 {
		b = append(b, `,"parallel_groups":`...)
		b = appendStringSlices(b, r.ParallelGroups)
	}
	if len(r.Always) != 0 {
		b = append(b, `,"always":`...)
		if b, err = appendSkillRefs(b, r.Always); err != nil {
			return b, err
		}
	}
	if r.EstimatedCost != 0 {
		b = append(b, `,"estimated_cost":`...)
		b = strconv.AppendInt(b, int64(r.EstimatedCost), 10)
	}
	if len(r.Parameters) != 0 {
		b = append(b, `,"parameters":`...)
		if b, err = appendMap(b, r.Parameters); err != nil {
			return b, err
		}
	}
	if r.Threshold != 0 {
		b = append(b, `,"threshold":`...)
		if b, err = jsonenc.AppendFloat(b, r.Threshold, 64); err != nil {
			return b, err
		}
	}
	if len(r.Candidates) != 0 {
		b = append(b, `,"candidates":`...)
		b = append(b, '[')
		for i := range r.Candidates {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = r.Candidates[i].appendJSON(b); err != nil {
				return b, err
			}
		}
		b = append(b, ']')
	}
	return closeObject(b, start), nil
}

// AppendJSON appends e encoded as json.Marshal encodes it. On error it returns b
// as it was and the error json.Marshal would give.
func (e ExecutionCompleted) AppendJSON(b []byte) ([]byte, error) {
	n := len(b)
	b, err := e.appendJSON(slices.Grow(b, e.size()))
	if err != nil {
		return b[:n], err
	}
	return b, nil
}

func (e *ExecutionCompleted) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"execution_id":`...)
	b = jsonenc.AppendString(b, e.ExecutionID)
	b = append(b, `,"activation_id":`...)
	b = jsonenc.AppendString(b, e.ActivationID)
	b = append(b, `,"skill":`...)
	b = jsonenc.AppendString(b, e.Skill)
	b = jsonenc.AppendOmitString(b, `,"version":`, e.Version)
	b = append(b, `,"outputs":`...)
	if b, err = appendMap(b, e.Outputs); err != nil {
		return b, err
	}
	b = append(b, `,"duration_ms":`...)
	if b, err = jsonenc.AppendFloat(b, e.DurationMS, 64); err != nil {
		return b, err
	}
	b = append(b, `,"attempt":`...)
	b = strconv.AppendUint(b, e.Attempt, 10)
	b = jsonenc.AppendOmitString(b, `,"worker":`, e.Worker)
	if len(e.Log) != 0 {
		b = append(b, `,"log":`...)
		if b, err = jsonenc.AppendRaw(b, e.Log); err != nil {
			return b, err
		}
	}
	b = jsonenc.AppendOmitString(b, `,"repair_id":`, e.RepairID)
	b = jsonenc.AppendOmitString(b, `,"digest":`, e.Digest)
	return append(b, '}'), nil
}

func (s *SkillRef) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"name":`...)
	b = jsonenc.AppendString(b, s.Name)
	b = jsonenc.AppendOmitString(b, `,"version":`, s.Version)
	b = jsonenc.AppendOmitString(b, `,"digest":`, s.Digest)
	b = append(b, `,"pool":`...)
	b = jsonenc.AppendString(b, s.Pool)
	b = append(b, `,"execution_id":`...)
	b = jsonenc.AppendString(b, s.ExecutionID)
	b = jsonenc.AppendOmitString(b, `,"source":`, s.Source)
	if s.Score != 0 {
		b = append(b, `,"score":`...)
		return appendFloatClose(b, s.Score)
	}
	return append(b, '}'), nil
}

// appendFloatClose appends f and closes the object.
func appendFloatClose(b []byte, f float64) ([]byte, error) {
	b, err := jsonenc.AppendFloat(b, f, 64)
	if err != nil {
		return b, err
	}
	return append(b, '}'), nil
}

func (t *TriggerRef) appendJSON(b []byte) []byte {
	start := len(b)
	b = jsonenc.AppendOmitString(b, `,"id":`, t.ID)
	b = jsonenc.AppendOmitString(b, `,"source":`, t.Source)
	b = jsonenc.AppendOmitString(b, `,"type":`, t.Type)
	b = append(b, `,"subject":`...)
	b = jsonenc.AppendString(b, t.Subject)
	if t.Seq != 0 {
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, t.Seq, 10)
	}
	return closeObject(b, start)
}

func (c *Candidate) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"name":`...)
	b = jsonenc.AppendString(b, c.Name)
	b = jsonenc.AppendOmitString(b, `,"version":`, c.Version)
	b = append(b, `,"source":`...)
	b = jsonenc.AppendString(b, c.Source)
	if len(c.Sources) != 0 {
		b = append(b, `,"sources":`...)
		b = jsonenc.AppendStrings(b, c.Sources)
	}
	b = append(b, `,"score":`...)
	if b, err = jsonenc.AppendFloat(b, c.Score, 64); err != nil {
		return b, err
	}
	b = append(b, `,"components":`...)
	if b, err = c.Components.appendJSON(b); err != nil {
		return b, err
	}
	b = appendBoolField(b, `,"selected":`, c.Selected)
	b = jsonenc.AppendOmitString(b, `,"role":`, c.Role)
	b = append(b, `,"reason":`...)
	b = jsonenc.AppendString(b, c.Reason)
	return append(b, '}'), nil
}

func (s *ScoreComponents) appendJSON(b []byte) ([]byte, error) {
	var err error
	for _, f := range [...]struct {
		key string
		v   float64
	}{
		{`{"intent":`, s.Intent}, {`,"trigger":`, s.Trigger}, {`,"success":`, s.Success},
		{`,"context":`, s.Context}, {`,"cost":`, s.Cost}, {`,"conflict":`, s.Conflict},
	} {
		b = append(b, f.key...)
		if b, err = jsonenc.AppendFloat(b, f.v, 64); err != nil {
			return b, err
		}
	}
	return append(appendBoolField(b, `,"available":`, s.Available), '}'), nil
}

// The size methods estimate the length of the encoding, so that AppendJSON grows
// its buffer once: the sum of the lengths of the strings and raw messages, and
// room for the keys and numbers. Escapes and unusual outputs may need more;
// append then grows the buffer again.

func (j *Job) size() int {
	n := 96 + len(j.ExecutionID) + len(j.ActivationID) + j.Skill.size() + len(j.Inputs) + j.Trigger.size()
	for i := range j.Fallback {
		n += 1 + j.Fallback[i].size()
	}
	n += 160*len(j.History) + 64*len(j.Answers) // on retries and confirmations, written by json.Marshal
	if j.Repair != nil {
		n += 256
	}
	for _, ids := range j.Together {
		for _, id := range ids {
			n += 3 + len(id)
		}
		n += 3
	}
	if j.Route != nil {
		n += 12 + j.Route.size()
	}
	return n
}

func (s *SkillRef) size() int {
	return 112 + len(s.Name) + len(s.Version) + len(s.Digest) + len(s.Pool) + len(s.ExecutionID) + len(s.Source)
}

func (t *TriggerRef) size() int {
	return 72 + len(t.ID) + len(t.Source) + len(t.Type) + len(t.Subject)
}

func (r *JobRoute) size() int {
	n := 160 + 64*len(r.Parameters) + 384*len(r.Candidates)
	if r.Primary != nil {
		n += r.Primary.size()
	}
	for i := range r.FallbackChain {
		n += r.FallbackChain[i].size()
	}
	for i := range r.Always {
		n += r.Always[i].size()
	}
	for _, g := range r.ParallelGroups {
		for _, name := range g {
			n += 3 + len(name)
		}
	}
	return n
}

func (e *ExecutionCompleted) size() int {
	n := 192 + len(e.ExecutionID) + len(e.ActivationID) + len(e.Skill) + len(e.Version) + len(e.Worker) +
		len(e.Log) + len(e.RepairID) + len(e.Digest)
	for k, v := range e.Outputs {
		n += 4 + len(k) + encodedValueSize(v)
	}
	return n
}

// encodedValueSize guesses the length of a dynamic value without walking into it.
func encodedValueSize(v any) int {
	switch v := v.(type) {
	case string:
		return 2 + len(v)
	case json.RawMessage:
		return len(v)
	case bool, nil:
		return 5
	}
	return 24
}

// closeObject turns the members appended since start, each led by a comma, into
// an object.
func closeObject(b []byte, start int) []byte {
	if len(b) == start {
		return append(b, "{}"...)
	}
	b[start] = '{'
	return append(b, '}')
}

func appendBoolField(b []byte, key string, v bool) []byte {
	b = append(b, key...)
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

func appendSkillRefs(b []byte, refs []SkillRef) ([]byte, error) {
	if refs == nil {
		return append(b, "null"...), nil
	}
	var err error
	b = append(b, '[')
	for i := range refs {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = refs[i].appendJSON(b); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

func appendStringSlices(b []byte, sss [][]string) []byte {
	if sss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, ss := range sss {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendStrings(b, ss)
	}
	return append(b, ']')
}

// appendMap appends m as json.Marshal does.
func appendMap(b []byte, m map[string]any) ([]byte, error) {
	return jsonenc.AppendValue(b, m)
}

// JSONSize is about how many bytes AppendJSON writes for j, so a caller appending
// it after something of its own can make the buffer once.
func (j *Job) JSONSize() int { return j.size() }

// JSONSize is about how many bytes AppendJSON writes for e (see Job.JSONSize).
func (e *ExecutionCompleted) JSONSize() int { return e.size() }

// A failure's outcome is not on the hot path: it, and the fields only some jobs
// carry (a retry's history, a confirmation's answers, a repair), are written by
// json.Marshal itself.

// AppendJSON appends e as json.Marshal encodes it. On error it returns b as it was
// and json.Marshal's error.
func (e ExecutionFailed) AppendJSON(b []byte) ([]byte, error) { return jsonenc.AppendMarshal(b, e) }

// AppendJSON appends e as json.Marshal encodes it. On error it returns b as it was
// and json.Marshal's error.
func (e ExecutionFallback) AppendJSON(b []byte) ([]byte, error) { return jsonenc.AppendMarshal(b, e) }

// JSONSize is about how many bytes AppendJSON writes for e (see Job.JSONSize).
func (e *ExecutionFailed) JSONSize() int { return 256 + len(e.Error) + len(e.Log) + 160*len(e.History) }

// JSONSize is about how many bytes AppendJSON writes for e (see Job.JSONSize).
func (e *ExecutionFallback) JSONSize() int { return 256 + len(e.Error) + len(e.Log) }
