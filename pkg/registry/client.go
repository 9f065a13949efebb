package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/skillbus/skillbus/events"
)

// ErrNoService: no skillbus-registry service answers on this connection and prefix.
var ErrNoService = errors.New("no skillbus-registry service answers")

// ServiceError is an error reply of the service.
type ServiceError struct {
	Code        string // "400", "404" or "500"
	Description string
}

func (e *ServiceError) Error() string { return e.Description }

// NotFound reports whether the service said the skill or version does not exist.
func (e *ServiceError) NotFound() bool { return e.Code == "404" }

// Client calls the skillbus-registry service.
type Client struct {
	nc     *nats.Conn
	prefix string
}

// NewClient returns a client for the service of the installation with this subject
// prefix ("" means "skillbus").
func NewClient(nc *nats.Conn, prefix string) *Client {
	if prefix == "" {
		prefix = "skillbus"
	}
	return &Client{nc: nc, prefix: prefix}
}

// List returns the catalog.
func (c *Client) List(ctx context.Context) (*ListResponse, error) {
	var out ListResponse
	return &out, c.call(ctx, EndpointList, ListRequest{}, &out)
}

// Get returns one skill.
func (c *Client) Get(ctx context.Context, req GetRequest) (*GetResponse, error) {
	var out GetResponse
	return &out, c.call(ctx, EndpointGet, req, &out)
}

// Search searches the catalog.
func (c *Client) Search(ctx context.Context, req SearchRequest) (*SearchResponse, error) {
	var out SearchResponse
	return &out, c.call(ctx, EndpointSearch, req, &out)
}

// Validate validates files on the registry's side.
func (c *Client) Validate(ctx context.Context, req ValidateRequest) (*ValidateResponse, error) {
	var out ValidateResponse
	return &out, c.call(ctx, EndpointValidate, req, &out)
}

// call sends one request. Without a deadline in ctx it waits 10 seconds.
func (c *Client) call(ctx context.Context, endpoint string, req, out any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	subject := events.Subjects{Prefix: c.prefix}.Registry(endpoint)
	msg, err := c.nc.RequestWithContext(ctx, subject, data)
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("%w (on %s)", ErrNoService, subject)
	}
	if err != nil {
		return fmt.Errorf("registry %s: %w", endpoint, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return &ServiceError{Code: code, Description: msg.Header.Get(micro.ErrorHeader)}
	}
	if err := json.Unmarshal(msg.Data, out); err != nil {
		return fmt.Errorf("registry %s: reply does not decode: %w", endpoint, err)
	}
	return nil
}
