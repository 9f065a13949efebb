package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/client"
)

// A program that sends a trigger to a running skillbus (skillbus dev, or a
// fleet) and waits for its outcome: connect, wrap the connection in a Bus (a
// client creates nothing: the registry and routers made the streams), run.
func Example() {
	nc, err := bus.Connect("nats://127.0.0.1:4222", "my-app") // nats.UserInfo(...) etc. as further options
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	b, err := bus.New(nc, bus.Config{}) // Config{Prefix: ...} if the fleet runs with --prefix
	if err != nil {
		log.Fatal(err)
	}
	c := client.New(b)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Run publishes and follows: the same Source and ID again is deduplicated, and
	// Run then answers with the first one's outcome.
	act, res, err := c.Run(ctx, client.Trigger{Skill: "hello", Source: "/my-app", ID: "order-1", Data: []byte(`{"name":"Ada"}`)}, nil)
	if err != nil {
		log.Fatal(err) // not published, or ctx ended before the outcome
	}
	if err := res.Err(); err != nil {
		log.Fatalf("activation %s: %v", act.ID, err) // failed, cancelled, unmatched, ...
	}
	fmt.Println(res.Outputs["greeting"])
}

// Publishing now and following later, from the activation Publish returns.
func ExampleClient_Follow() {
	nc, err := bus.Connect("nats://127.0.0.1:4222", "my-app")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	b, err := bus.New(nc, bus.Config{})
	if err != nil {
		log.Fatal(err)
	}
	c := client.New(b)
	ctx := context.Background()
	act, err := c.Publish(ctx, client.Trigger{Skill: "hello", Data: []byte(`{"name":"Ada"}`)})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Follow(ctx, act.ID, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Outputs["greeting"], res.Err())
}
