package bustool

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Discover asks every NATS micro service on the bus for its info ($SRV.INFO) and
// returns the tools the skillbus tool services among them serve under cfg's
// prefix, sorted by name. Instances of a service, and services serving a tool
// alike, yield the tool once. It waits at most DiscoverTimeout, less once the
// replies stop (DiscoverStall), and returns at once when no service runs at all.
func Discover(ctx context.Context, nc *nats.Conn, cfg Config) ([]*Tool, error) {
	tools, _, err := discover(ctx, nc, cfg)
	return tools, err
}

// discover is Discover that also returns the problems it skipped: endpoints
// that describe no valid tool, and tools served twice with different
// descriptions.
func discover(ctx context.Context, nc *nats.Conn, cfg Config) ([]*Tool, []string, error) {
	if nc == nil {
		return nil, nil, errors.New("bustool: Discover needs a NATS connection")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	infos, err := gatherInfo(ctx, nc, cfg)
	if err != nil {
		return nil, nil, err
	}
	// Sort for a deterministic choice between services that disagree.
	slices.SortFunc(infos, func(a, b micro.Info) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	var problems []string
	byName := map[string]*Tool{}
	for _, info := range infos {
		for _, ep := range info.Endpoints {
			if ep.Metadata[MetaTool] == "" {
				continue
			}
			t, err := toolFromInfo(nc, cfg, ep.Subject, ep.Metadata)
			if err != nil {
				problems = append(problems, fmt.Sprintf("service %s (%s) endpoint %s: %v", info.Name, info.ID, ep.Name, err))
				continue
			}
			if prev, ok := byName[t.name]; ok {
				if !sameTool(prev, t) {
					problems = append(problems, fmt.Sprintf("service %s (%s) serves tool %s unlike another service; the calls go to either", info.Name, info.ID, t.name))
				}
				continue
			}
			byName[t.name] = t
		}
	}
	tools := make([]*Tool, 0, len(byName))
	for _, t := range byName {
		tools = append(tools, t)
	}
	slices.SortFunc(tools, func(a, b *Tool) int { return cmp.Compare(a.name, b.name) })
	return tools, problems, nil
}

// gatherInfo collects the $SRV.INFO replies of the skillbus tool services.
func gatherInfo(ctx context.Context, nc *nats.Conn, cfg Config) ([]micro.Info, error) {
	subject, err := micro.ControlSubject(micro.InfoVerb, "", "")
	if err != nil {
		return nil, err
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("bustool: discovering tools: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		return nil, fmt.Errorf("bustool: discovering tools: %w", err)
	}

	limit, cancel := context.WithTimeout(ctx, cfg.DiscoverTimeout)
	defer cancel()
	var infos []micro.Info
	for {
		wait, stop := limit, context.CancelFunc(func() {})
		if len(infos) > 0 {
			wait, stop = context.WithTimeout(limit, cfg.DiscoverStall)
		}
		msg, err := sub.NextMsgWithContext(wait)
		expired := wait.Err() != nil
		stop()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil, fmt.Errorf("bustool: discovering tools: %w", ctx.Err())
		case expired:
			return infos, nil // DiscoverTimeout passed, or the replies stopped coming
		case errors.Is(err, nats.ErrNoResponders):
			return nil, nil // no micro service runs at all
		default:
			return nil, fmt.Errorf("bustool: discovering tools: %w", err)
		}
		if info, ok := parseInfo(msg.Data); ok {
			infos = append(infos, info)
		}
	}
}

// parseInfo reads a $SRV.INFO reply and reports whether it comes from a skillbus
// tool service.
func parseInfo(data []byte) (micro.Info, bool) {
	var info micro.Info
	if err := json.Unmarshal(data, &info); err != nil {
		return micro.Info{}, false
	}
	if info.Metadata[MetaProtocol] != ProtocolVersion {
		return micro.Info{}, false
	}
	return info, true
}
