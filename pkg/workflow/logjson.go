package workflow

import (
	"slices"
	"strconv"
	"time"

	"github.com/skillbus/skillbus/internal/jsonenc"
)

// AppendJSON appends l as json.Marshal writes it, byte for byte, without its
// reflection: every outcome a worker publishes carries its log. On error it
// returns b as it was and the error json.Marshal would give. A field added to Log
// or StepLog must be written here too; a test compares every field with
// json.Marshal.
func (l *Log) AppendJSON(b []byte) ([]byte, error) {
	if l == nil {
		return append(b, "null"...), nil
	}
	n := len(b)
	b, err := l.appendJSON(slices.Grow(b, l.size()))
	if err != nil {
		return b[:n], err
	}
	return b, nil
}

func (l *Log) size() int {
	n := 256 + len(l.ExecutionID) + len(l.Skill) + len(l.Version) + len(l.FailedStep) + len(l.Error) + len(l.Waiting)
	for i := range l.Steps {
		s := &l.Steps[i]
		n += 192 + len(s.ID) + len(s.Tool) + len(s.Reason) + len(s.Result) + len(s.Error) + len(s.HealOf) + len(s.RetryOf)
	}
	return n
}

func (l *Log) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"execution_id":`...)
	b = jsonenc.AppendString(b, l.ExecutionID)
	b = append(b, `,"skill":`...)
	b = jsonenc.AppendString(b, l.Skill)
	b = jsonenc.AppendOmitString(b, `,"version":`, l.Version)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendUint(b, l.Attempt, 10)
	b = append(b, `,"status":`...)
	b = jsonenc.AppendString(b, l.Status)
	b = append(b, `,"started":`...)
	if b, err = jsonenc.AppendTime(b, l.Started); err != nil {
		return b, err
	}
	b = append(b, `,"finished":`...)
	if b, err = jsonenc.AppendTime(b, l.Finished); err != nil {
		return b, err
	}
	b = append(b, `,"duration_ms":`...)
	if b, err = jsonenc.AppendFloat(b, l.DurationMS, 64); err != nil {
		return b, err
	}
	b = jsonenc.AppendOmitString(b, `,"failed_step":`, l.FailedStep)
	b = jsonenc.AppendOmitString(b, `,"error":`, l.Error)
	b = jsonenc.AppendOmitString(b, `,"class":`, string(l.Class))
	b = jsonenc.AppendOmitString(b, `,"waiting":`, l.Waiting)
	b = append(b, `,"steps":`...)
	if l.Steps == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range l.Steps {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = l.Steps[i].appendJSON(b); err != nil {
				return b, err
			}
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

func (s *StepLog) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, s.ID)
	b = append(b, `,"kind":`...)
	b = jsonenc.AppendString(b, s.Kind)
	b = jsonenc.AppendOmitString(b, `,"tool":`, s.Tool)
	b = append(b, `,"status":`...)
	b = jsonenc.AppendString(b, string(s.Status))
	b = jsonenc.AppendOmitString(b, `,"reason":`, s.Reason)
	if b, err = appendLogTime(b, `,"started":`, s.Started); err != nil {
		return b, err
	}
	if b, err = appendLogTime(b, `,"finished":`, s.Finished); err != nil {
		return b, err
	}
	if s.DurationMS != 0 {
		b = append(b, `,"duration_ms":`...)
		if b, err = jsonenc.AppendFloat(b, s.DurationMS, 64); err != nil {
			return b, err
		}
	}
	b = jsonenc.AppendOmitString(b, `,"result":`, s.Result)
	b = jsonenc.AppendOmitString(b, `,"error":`, s.Error)
	b = jsonenc.AppendOmitString(b, `,"class":`, string(s.Class))
	if s.Attempt != 0 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendUint(b, s.Attempt, 10)
	}
	if s.Resumed {
		b = append(b, `,"resumed":true`...)
	}
	if s.Calls != 0 {
		b = append(b, `,"calls":`...)
		b = strconv.AppendInt(b, int64(s.Calls), 10)
	}
	if s.CacheHits != 0 {
		b = append(b, `,"cache_hits":`...)
		b = strconv.AppendInt(b, int64(s.CacheHits), 10)
	}
	if s.Cached {
		b = append(b, `,"cached":true`...)
	}
	b = jsonenc.AppendOmitString(b, `,"heal_of":`, s.HealOf)
	b = jsonenc.AppendOmitString(b, `,"failure_type":`, s.FailureType)
	b = jsonenc.AppendOmitString(b, `,"retry_of":`, s.RetryOf)
	return append(b, '}'), nil
}

// appendLogTime writes a time field tagged omitzero.
func appendLogTime(b []byte, key string, t time.Time) ([]byte, error) {
	if t.IsZero() {
		return b, nil
	}
	return jsonenc.AppendTime(append(b, key...), t)
}

// JSONSize is about how many bytes AppendJSON writes for l, so that a caller
// appending it after something of its own makes its buffer once: the strings'
// lengths (a step's result, JSON in a string, a quarter more for its escapes) and
// room for the keys, times and numbers.
func (l *Log) JSONSize() int {
	n := 256 + len(l.ExecutionID) + len(l.Skill) + len(l.Version) + len(l.FailedStep) + len(l.Error) + len(l.Class) + len(l.Waiting)
	for i := range l.Steps {
		s := &l.Steps[i]
		n += 224 + len(s.ID) + len(s.Tool) + len(s.Reason) + len(s.Result)*5/4 + len(s.Error) + len(s.Class) +
			len(s.HealOf) + len(s.FailureType) + len(s.RetryOf)
	}
	return n
}
