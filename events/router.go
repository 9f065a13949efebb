package events

import "encoding/json"

// RouterEndpointRoute is the endpoint of the skillbus-router service that answers
// "how would you route this?" with a selector.Decision, publishing nothing; its
// subject is Subjects.Router(RouterEndpointRoute).
const RouterEndpointRoute = "route"

// RouteRequest is the body of a route request. Data is the trigger's data, from which
// the text is taken when Text is empty.
type RouteRequest struct {
	Type  string          `json:"type,omitempty"`
	Skill string          `json:"skill,omitempty"`
	Text  string          `json:"text,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
}
