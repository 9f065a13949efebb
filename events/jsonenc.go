package events

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// The types every execution publishes (a job, its route, its outcome) encode
// themselves with AppendJSON instead of going through encoding/json's reflection,
// which on the hot path costs more than the rest of building the message. The
// output is byte for byte what json.Marshal writes for the same value — HTML-safe
// escaping, sorted map keys, omitempty, compacted raw messages, the same float
// format — and AppendJSON fails where json.Marshal fails, so readers cannot tell
// the two apart. Values of the generic JSON types (maps, slices, strings, numbers,
// json.RawMessage, json.Number, time.Time) are written directly; any other type
// found in an output or a parameter is handed to json.Marshal. A field added to
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
	b = appendString(b, j.ExecutionID)
	b = append(b, `,"activation_id":`...)
	b = appendString(b, j.ActivationID)
	b = append(b, `,"skill":`...)
	if b, err = j.Skill.appendJSON(b); err != nil {
		return b, err
	}
	if len(j.Inputs) != 0 {
		b = append(b, `,"inputs":`...)
		if b, err = appendRaw(b, j.Inputs); err != nil {
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
		if b, err = appendFloat(b, r.Threshold, 64); err != nil {
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
	b = appendString(b, e.ExecutionID)
	b = append(b, `,"activation_id":`...)
	b = appendString(b, e.ActivationID)
	b = append(b, `,"skill":`...)
	b = appendString(b, e.Skill)
	b = appendOmitString(b, `,"version":`, e.Version)
	b = append(b, `,"outputs":`...)
	if b, err = appendMap(b, e.Outputs); err != nil {
		return b, err
	}
	b = append(b, `,"duration_ms":`...)
	if b, err = appendFloat(b, e.DurationMS, 64); err != nil {
		return b, err
	}
	b = append(b, `,"attempt":`...)
	b = strconv.AppendUint(b, e.Attempt, 10)
	b = appendOmitString(b, `,"worker":`, e.Worker)
	if len(e.Log) != 0 {
		b = append(b, `,"log":`...)
		if b, err = appendRaw(b, e.Log); err != nil {
			return b, err
		}
	}
	b = appendOmitString(b, `,"repair_id":`, e.RepairID)
	b = appendOmitString(b, `,"digest":`, e.Digest)
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
	b = appendString(b, e.ExecutionID)
	b = append(b, `,"activation_id":`...)
	b = appendString(b, e.ActivationID)
	b = append(b, `,"skill":`...)
	b = appendString(b, e.Skill)
	b = appendOmitString(b, `,"version":`, e.Version)
	b = appendOmitString(b, `,"step_id":`, e.StepID)
	b = append(b, `,"class":`...)
	b = appendString(b, e.Class)
	b = append(b, `,"error":`...)
	b = appendString(b, e.Error)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendUint(b, e.Attempt, 10)
	if len(e.History) != 0 {
		b = append(b, `,"history":`...)
		b = appendAttempts(b, e.History)
	}
	b = appendOmitString(b, `,"dead_letter":`, e.DeadLetter)
	if e.Denied {
		b = append(b, `,"denied":true`...)
	}
	if e.DurationMS != 0 {
		b = append(b, `,"duration_ms":`...)
		if b, err = appendFloat(b, e.DurationMS, 64); err != nil {
			return b, err
		}
	}
	b = appendOmitString(b, `,"worker":`, e.Worker)
	if len(e.Log) != 0 {
		b = append(b, `,"log":`...)
		if b, err = appendRaw(b, e.Log); err != nil {
			return b, err
		}
	}
	b = appendOmitString(b, `,"repair_id":`, e.RepairID)
	b = appendOmitString(b, `,"digest":`, e.Digest)
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
	b = appendString(b, e.ExecutionID)
	b = appendOmitString(b, `,"activation_id":`, e.ActivationID)
	b = append(b, `,"skill":`...)
	b = appendString(b, e.Skill)
	b = appendOmitString(b, `,"version":`, e.Version)
	b = append(b, `,"next":`...)
	b = appendString(b, e.Next)
	b = append(b, `,"next_execution_id":`...)
	b = appendString(b, e.NextExecutionID)
	b = appendOmitString(b, `,"step_id":`, e.StepID)
	b = append(b, `,"class":`...)
	b = appendString(b, e.Class)
	b = append(b, `,"error":`...)
	b = appendString(b, e.Error)
	if e.Attempt != 0 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendUint(b, e.Attempt, 10)
	}
	if e.DurationMS != 0 {
		b = append(b, `,"duration_ms":`...)
		if b, err = appendFloat(b, e.DurationMS, 64); err != nil {
			return b, err
		}
	}
	b = appendOmitString(b, `,"worker":`, e.Worker)
	if len(e.Log) != 0 {
		b = append(b, `,"log":`...)
		if b, err = appendRaw(b, e.Log); err != nil {
			return b, err
		}
	}
	b = appendOmitString(b, `,"repair_id":`, e.RepairID)
	b = appendOmitString(b, `,"digest":`, e.Digest)
	return append(b, '}'), nil
}

func (s *SkillRef) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"name":`...)
	b = appendString(b, s.Name)
	b = appendOmitString(b, `,"version":`, s.Version)
	b = appendOmitString(b, `,"digest":`, s.Digest)
	b = append(b, `,"pool":`...)
	b = appendString(b, s.Pool)
	b = append(b, `,"execution_id":`...)
	b = appendString(b, s.ExecutionID)
	b = appendOmitString(b, `,"source":`, s.Source)
	if s.Score != 0 {
		b = append(b, `,"score":`...)
		return appendFloatClose(b, s.Score)
	}
	return append(b, '}'), nil
}

// appendFloatClose appends f and closes the object.
func appendFloatClose(b []byte, f float64) ([]byte, error) {
	b, err := appendFloat(b, f, 64)
	if err != nil {
		return b, err
	}
	return append(b, '}'), nil
}

func (t *TriggerRef) appendJSON(b []byte) []byte {
	start := len(b)
	b = appendOmitString(b, `,"id":`, t.ID)
	b = appendOmitString(b, `,"source":`, t.Source)
	b = appendOmitString(b, `,"type":`, t.Type)
	b = append(b, `,"subject":`...)
	b = appendString(b, t.Subject)
	if t.Seq != 0 {
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, t.Seq, 10)
	}
	return closeObject(b, start)
}

func (a *Attempt) appendJSON(b []byte) []byte {
	b = append(b, `{"skill":`...)
	b = appendString(b, a.Skill)
	b = append(b, `,"execution_id":`...)
	b = appendString(b, a.ExecutionID)
	b = append(b, `,"class":`...)
	b = appendString(b, a.Class)
	b = append(b, `,"error":`...)
	b = appendString(b, a.Error)
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
	b = appendOmitString(b, `,"by":`, a.By)
	b = appendOmitString(b, `,"reason":`, a.Reason)
	return append(b, '}')
}

func (r *JobRepair) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"budget_key":`...)
	b = appendString(b, r.BudgetKey)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(r.Attempts), 10)
	b = appendOmitString(b, `,"declined":`, r.Declined)
	b = appendOmitString(b, `,"step":`, r.Step)
	b = appendOmitString(b, `,"error":`, r.Error)
	b = appendOmitString(b, `,"class":`, r.Class)
	b = appendOmitString(b, `,"from":`, r.From)
	return append(b, '}')
}

func (c *Candidate) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"name":`...)
	b = appendString(b, c.Name)
	b = appendOmitString(b, `,"version":`, c.Version)
	b = append(b, `,"source":`...)
	b = appendString(b, c.Source)
	if len(c.Sources) != 0 {
		b = append(b, `,"sources":`...)
		b = appendStrings(b, c.Sources)
	}
	b = append(b, `,"score":`...)
	if b, err = appendFloat(b, c.Score, 64); err != nil {
		return b, err
	}
	b = append(b, `,"components":`...)
	if b, err = c.Components.appendJSON(b); err != nil {
		return b, err
	}
	b = appendBoolField(b, `,"selected":`, c.Selected)
	b = appendOmitString(b, `,"role":`, c.Role)
	b = append(b, `,"reason":`...)
	b = appendString(b, c.Reason)
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
		if b, err = appendFloat(b, f.v, 64); err != nil {
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

func appendOmitString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	b = append(b, key...)
	return appendString(b, s)
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
	for i, k := range appendSortedKeys(arr[:0], m) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		a := m[k]
		b = a.appendJSON(b)
	}
	return append(b, '}')
}

func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
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
		b = appendStrings(b, ss)
	}
	return append(b, ']')
}

// appendSortedKeys appends m's keys to keys in the order json.Marshal writes them
// (byte-wise). Given a slice of a local array, a small map's keys stay off the heap.
func appendSortedKeys[V any](keys []string, m map[string]V) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// encodeMaxDepth is how deep appendValue nests before it hands a value to json.Marshal,
// which tells a cycle (an error) from a deep value.
const encodeMaxDepth = 1000

// appendValue appends v, a value of any type, as json.Marshal does.
func appendValue(b []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, v), nil
	case float64:
		return appendFloat(b, v, 64)
	case bool:
		if v {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	// Maps and slices recurse here rather than in functions of their own: the
	// compiler then sees that b only flows to the result, and a caller's buffer
	// may stay on its stack.
	case map[string]any:
		if v == nil {
			return append(b, "null"...), nil
		}
		if depth >= encodeMaxDepth {
			return appendMarshal(b, v)
		}
		var err error
		b = append(b, '{')
		var arr [8]string
		for i, k := range appendSortedKeys(arr[:0], v) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			if b, err = appendValue(b, v[k], depth+1); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	case []any:
		if v == nil {
			return append(b, "null"...), nil
		}
		if depth >= encodeMaxDepth {
			return appendMarshal(b, v)
		}
		var err error
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendValue(b, e, depth+1); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	case json.Number:
		return appendNumber(b, v)
	case json.RawMessage:
		if v == nil {
			return append(b, "null"...), nil
		}
		return appendRaw(b, v)
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case int32:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int16:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int8:
		return strconv.AppendInt(b, int64(v), 10), nil
	case uint:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case uint64:
		return strconv.AppendUint(b, v, 10), nil
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case uint16:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case uint8:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case float32:
		return appendFloat(b, float64(v), 32)
	case []string:
		return appendStrings(b, v), nil
	case map[string]string:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '{')
		var arr [16]string
		for i, k := range appendSortedKeys(arr[:0], v) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendString(b, v[k])
		}
		return append(b, '}'), nil
	case time.Time:
		return appendTime(b, v)
	}
	return appendMarshal(b, v)
}

func appendMarshal(b []byte, v any) ([]byte, error) {
	out, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, out...), nil
}

// appendMap appends m as json.Marshal does.
func appendMap(b []byte, m map[string]any) ([]byte, error) {
	return appendValue(b, m, 0)
}

// appendFloat writes f as encoding/json does: like ES6's number to string, with
// exponents from 1e21 and below 1e-6, and no NaN or infinity.
func appendFloat(b []byte, f float64, bits int) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		var v reflect.Value
		if bits == 32 {
			v = reflect.ValueOf(float32(f))
		} else {
			v = reflect.ValueOf(f)
		}
		return b, &json.UnsupportedValueError{Value: v, Str: strconv.FormatFloat(f, 'g', -1, bits)}
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// e-09 becomes e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

func appendNumber(b []byte, n json.Number) ([]byte, error) {
	s := string(n)
	if s == "" {
		s = "0" // what encoding/json writes for Number's zero value
	}
	if !validNumberLiteral(s) {
		return b, fmt.Errorf("json: invalid number literal %q", s)
	}
	return append(b, s...), nil
}

// validNumberLiteral reports whether s is a JSON number literal.
func validNumberLiteral(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' {
		s = s[1:]
		if s == "" {
			return false
		}
	}
	switch {
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = s[1:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		s = s[2:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			s = s[1:]
			if s == "" {
				return false
			}
		}
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	return s == ""
}

func appendTime(b []byte, t time.Time) ([]byte, error) {
	out, err := t.AppendText(append(b, '"'))
	if err != nil {
		// MarshalJSON gives the error json.Marshal reports.
		_, err = t.MarshalJSON()
		return b, &json.MarshalerError{Type: reflect.TypeFor[time.Time](), Err: err}
	}
	return append(out, '"'), nil
}

const lowerHex = "0123456789abcdef"

// htmlSafe marks the ASCII bytes a JSON string holds as they are when escaping HTML.
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString appends s quoted as encoding/json quotes strings: HTML-safe, with
// U+2028 and U+2029 escaped and each byte of invalid UTF-8 as U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if htmlSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', lowerHex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
