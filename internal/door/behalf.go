package door

import "context"

// Behalf is the person an agent's request acts for. The identify stage sets
// it when the credential is an access token the gateway's own authorization
// server issued to a person's client (an IDE's MCP client, signed in through
// the organisation's provider): the agent is the identity the person chose
// and policy allowed, the person is who is at the keyboard. A request with an
// agent's own key, certificate or sidecar identity has none.
//
// Doors record it beside the agent (audit, history) and use it to pick what
// belongs to that person, such as the delegated token an upstream MCP server
// issued them; they never take it from anything but the context.
type Behalf struct {
	// Subject and Email are the identity provider's; Name is how the person
	// appears in entries (the e-mail, else the subject).
	Subject string
	Email   string
	Name    string
}

type behalfKey struct{}

// WithBehalf returns ctx carrying b. Only the identify stage calls it.
func WithBehalf(ctx context.Context, b Behalf) context.Context {
	return context.WithValue(ctx, behalfKey{}, b)
}

// BehalfOf returns the person the request acts for, if any.
func BehalfOf(ctx context.Context) (Behalf, bool) {
	b, ok := ctx.Value(behalfKey{}).(Behalf)
	return b, ok && b.Subject != ""
}
