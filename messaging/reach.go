package messaging

import (
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/policy"
)

// MayMessage is the relay's first verdict on configured agent sender
// sending action to recipient (RBAC, the messages rules; a send also asks
// the messages policy). A workflow's registry-driven node calls only an
// agent its run's caller may message.
func (s *Service) MayMessage(sender, recipient, action string) policy.Authz {
	return s.conf.Load().rbac.AuthorizeMessage(sender, recipient, action)
}

// Configured returns agent id of the configuration the relay serves now
// (nil for an agent spawned at run time).
func (s *Service) Configured(id string) *roster.Agent {
	return s.conf.Load().cfg.Agents[id]
}
