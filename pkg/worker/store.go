package worker

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// StepKey is the runs key of a step's checkpoint.
func StepKey(executionID, stepID string) string { return executionID + ".step." + stepID }

// checkpoints stores one job's step checkpoints in KV runs. Saves are queued on the
// job's batch — pipelined, not a round trip each — and, like everything else the job
// causes, acknowledged before the job is. A step that runs after a save was queued
// but before it was acknowledged gains nothing from the checkpoint if the worker dies
// in between; it runs again, with the same idempotency key, as it would with a
// synchronous save that died one instruction later.
type checkpoints struct {
	kv     jetstream.KeyValue
	bucket string
	batch  *bus.Batch
	// fresh: this delivery is the execution's first, so there is nothing to load.
	fresh bool
}

func (c *checkpoints) Load(ctx context.Context, executionID string) (map[string]workflow.Checkpoint, error) {
	out := map[string]workflow.Checkpoint{}
	if c.fresh {
		return out, nil
	}
	w, err := c.kv.WatchFiltered(ctx, []string{StepKey(executionID, "*")}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, failure.Wrap(failure.Retryable, err)
	}
	defer w.Stop()
	prefix := StepKey(executionID, "")
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				return out, nil
			}
			var cp workflow.Checkpoint
			if err := json.Unmarshal(e.Value(), &cp); err != nil {
				continue // a checkpoint we cannot read is a step we run again
			}
			out[strings.TrimPrefix(e.Key(), prefix)] = cp
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c *checkpoints) Save(_ context.Context, executionID, stepID string, cp workflow.Checkpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return failure.Fatalf("checkpoint of step %s: %v", stepID, err)
	}
	c.batch.Put(c.bucket, StepKey(executionID, stepID), b)
	return nil
}

// cache keeps step results in KV cache with a TTL per key.
type cache struct {
	kv jetstream.KeyValue
}

func (c *cache) Get(ctx context.Context, key string) (any, bool, error) {
	e, err := c.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var v any
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return nil, false, nil
	}
	return v, true, nil
}

func (c *cache) Put(ctx context.Context, key string, v any, ttl time.Duration) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = c.kv.Create(ctx, key, b, jetstream.KeyTTL(max(ttl, time.Second)))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil // another execution cached it first
	}
	return err
}
