package events

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/skillbus/skillbus/internal/jsonenc"
)

// The types every execution publishes (a job, its route, its outcome) encode
// themselves with AppendJSON instead of going through encoding/json's reflection,
// which on the hot path costs more than the rest of building the message. The
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
		b = appendAttempts(b, j.History)
	}
	if len(j.Answers) != 0 {
		b = append(b, `,"answers":`...)
		b = appendAnswers(b, j.Answers)
	}
	if j.Depth != 0 {
		b = append(b, `,"depth":`...)
		b = strconv.AppendInt(b, int64(j.Depth), 10)
	}
	if j.Repair != nil {
		b = append(b, `,"repair":`...)
		b = j.Repair.appendJSON(b)
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

// AppendJSON appends e encoded as json.Marshal encodes it. On error it returns b
// as it was and the error json.Marshal would give.
func (e ExecutionFailed) AppendJSON(b []byte) ([]byte, error) {
	n := len(b)
	b, err := e.appendJSON(slices.Grow(b, e.size()))
	if err != nil {
		return b[:n], err
	}
	return b, nil
}

func (e *ExecutionFailed) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"execution_id":`...)
	b = jsonenc.AppendString(b, e.ExecutionID)
	b = append(b, `,"activation_id":`...)
	b = jsonenc.AppendString(b, e.ActivationID)
	b = append(b, `,"skill":`...)
	b = jsonenc.AppendString(b, e.Skill)
	b = jsonenc.AppendOmitString(b, `,"version":`, e.Version)
	b = jsonenc.AppendOmitString(b, `,"step_id":`, e.StepID)
	b = append(b, `,"class":`...)
	b = jsonenc.AppendString(b, e.Class)
	b = append(b, `,"error":`...)
	b = jsonenc.AppendString(b, e.Error)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendUint(b, e.Attempt, 10)
	if len(e.History) != 0 {
		b = append(b, `,"history":`...)
		b = appendAttempts(b, e.History)
	}
	b = jsonenc.AppendOmitString(b, `,"dead_letter":`, e.DeadLetter)
	if e.Denied {
		b = append(b, `,"denied":true`...)
	}
	if e.DurationMS != 0 {
		b = append(b, `,"duration_ms":`...)
		if b, err = jsonenc.AppendFloat(b, e.DurationMS, 64); err != nil {
			return b, err
		}
	}
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

// AppendJSON appends e encoded as json.Marshal encodes it. On error it returns b
// as it was and the error json.Marshal would give.
func (e ExecutionFallback) AppendJSON(b []byte) ([]byte, error) {
	n := len(b)
	b, err := e.appendJSON(slices.Grow(b, e.size()))
	if err != nil {
		return b[:n], err
	}
	return b, nil
}

func (e *ExecutionFallback) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"execution_id":`...)
	b = jsonenc.AppendString(b, e.ExecutionID)
	b = jsonenc.AppendOmitString(b, `,"activation_id":`, e.ActivationID)
	b = append(b, `,"skill":`...)
	b = jsonenc.AppendString(b, e.Skill)
	b = jsonenc.AppendOmitString(b, `,"version":`, e.Version)
	b = append(b, `,"next":`...)
	b = jsonenc.AppendString(b, e.Next)
	b = append(b, `,"next_execution_id":`...)
	b = jsonenc.AppendString(b, e.NextExecutionID)
	b = jsonenc.AppendOmitString(b, `,"step_id":`, e.StepID)
	b = append(b, `,"class":`...)
	b = jsonenc.AppendString(b, e.Class)
	b = append(b, `,"error":`...)
	b = jsonenc.AppendString(b, e.Error)
	if e.Attempt != 0 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendUint(b, e.Attempt, 10)
	}
	if e.DurationMS != 0 {
		b = append(b, `,"duration_ms":`...)
		if b, err = jsonenc.AppendFloat(b, e.DurationMS, 64); err != nil {
			return b, err
		}
	}
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

func (a *Attempt) appendJSON(b []byte) []byte {
	b = append(b, `{"skill":`...)
	b = jsonenc.AppendString(b, a.Skill)
	b = append(b, `,"execution_id":`...)
	b = jsonenc.AppendString(b, a.ExecutionID)
	b = append(b, `,"class":`...)
	b = jsonenc.AppendString(b, a.Class)
	b = append(b, `,"error":`...)
	b = jsonenc.AppendString(b, a.Error)
	b = append(b, `,"deliveries":`...)
	b = strconv.AppendUint(b, a.Deliveries, 10)
	return append(b, '}')
}

func (a *Answer) appendJSON(b []byte) []byte {
	if a.Approved {
		b = append(b, `{"approved":true`...)
	} else {
		b = append(b, `{"approved":false`...)
	}
	b = jsonenc.AppendOmitString(b, `,"by":`, a.By)
	b = jsonenc.AppendOmitString(b, `,"reason":`, a.Reason)
	return append(b, '}')
}

func (r *JobRepair) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, r.ID)
	b = append(b, `,"budget_key":`...)
	b = jsonenc.AppendString(b, r.BudgetKey)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(r.Attempts), 10)
	b = jsonenc.AppendOmitString(b, `,"declined":`, r.Declined)
	b = jsonenc.AppendOmitString(b, `,"step":`, r.Step)
	b = jsonenc.AppendOmitString(b, `,"error":`, r.Error)
	b = jsonenc.AppendOmitString(b, `,"class":`, r.Class)
	b = jsonenc.AppendOmitString(b, `,"from":`, r.From)
	return append(b, '}')
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
	for i := range j.History {
		a := &j.History[i]
		n += 96 + len(a.Skill) + len(a.ExecutionID) + len(a.Class) + len(a.Error)
	}
	for k, a := range j.Answers {
		n += 48 + len(k) + len(a.By) + len(a.Reason)
	}
	if r := j.Repair; r != nil {
		n += 128 + len(r.ID) + len(r.BudgetKey) + len(r.Declined) + len(r.Step) + len(r.Error) + len(r.Class) + len(r.From)
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

func (e *ExecutionFailed) size() int {
	n := 224 + len(e.ExecutionID) + len(e.ActivationID) + len(e.Skill) + len(e.Version) + len(e.StepID) +
		len(e.Class) + len(e.Error) + len(e.DeadLetter) + len(e.Worker) + len(e.Log) + len(e.RepairID) + len(e.Digest)
	for i := range e.History {
		a := &e.History[i]
		n += 96 + len(a.Skill) + len(a.ExecutionID) + len(a.Class) + len(a.Error)
	}
	return n
}

func (e *ExecutionFallback) size() int {
	return 256 + len(e.ExecutionID) + len(e.ActivationID) + len(e.Skill) + len(e.Version) + len(e.Next) +
		len(e.NextExecutionID) + len(e.StepID) + len(e.Class) + len(e.Error) + len(e.Worker) + len(e.Log) +
		len(e.RepairID) + len(e.Digest)
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

func appendAttempts(b []byte, as []Attempt) []byte {
	if as == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range as {
		if i > 0 {
			b = append(b, ',')
		}
		b = as[i].appendJSON(b)
	}
	return append(b, ']')
}

func appendAnswers(b []byte, m map[string]Answer) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	var arr [16]string
	for i, k := range jsonenc.SortedKeys(arr[:0], m) {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, k)
		b = append(b, ':')
		a := m[k]
		b = a.appendJSON(b)
	}
	return append(b, '}')
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

// JSONSize is about how many bytes AppendJSON writes for e (see Job.JSONSize).
func (e *ExecutionFailed) JSONSize() int { return e.size() }

// JSONSize is about how many bytes AppendJSON writes for e (see Job.JSONSize).
func (e *ExecutionFallback) JSONSize() int { return e.size() }
