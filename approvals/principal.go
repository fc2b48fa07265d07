package approval

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Role is what an API key may do; each role includes the ones below it.
type Role int

// Roles of API keys, weakest first.
const (
	// RoleNone is no role: a principal that is not an API key.
	RoleNone Role = iota
	// RoleViewer reads: agents, runs, sessions, approvals, routines.
	RoleViewer
	// RoleOperator also starts runs, triggers routines and cancels the runs
	// it started.
	RoleOperator
	// RoleApprover also decides approvals (within the tools' approvers).
	RoleApprover
	// RoleAdmin may do everything: routines, any cancel, the audit log.
	RoleAdmin
)

// Roles names the roles in order, for configuration and messages.
var Roles = []string{"viewer", "operator", "approver", "admin"}

func (r Role) String() string {
	if r <= RoleNone || int(r) > len(Roles) {
		return "none"
	}
	return Roles[r-1]
}

// ParseRole reads a role name.
func ParseRole(s string) (Role, error) {
	if i := slices.Index(Roles, s); i >= 0 {
		return Role(i + 1), nil
	}
	return RoleNone, fmt.Errorf("unknown role %q (one of %s)", s, strings.Join(Roles, ", "))
}

// Routes a principal acts through (recorded as decided_via and in the audit).
const (
	RouteAPI      = "api"
	RouteCLI      = "cli"
	RouteMCP      = "mcp"
	RouteSlack    = "slack"
	RouteDiscord  = "discord"
	RouteTelegram = "telegram"
)

// Place is where a chat click happened: the message holding the buttons.
type Place struct {
	Platform  string
	Workspace string // Slack team id; "" elsewhere
	Channel   string // channel, thread channel or chat id
	Message   string // the card's message ref (Slack ts, Discord / Telegram message id)
}

// Principal is an authenticated actor, built by a route from its credential
// (an API key, a platform's signed payload) and never from a body field.
type Principal struct {
	// ID is stable and namespaced: key:<name>, slack:<team>/<user>,
	// discord:<user>, telegram:<user>.
	ID string
	// Route is how the principal reached the gateway (RouteAPI, …).
	Route string
	// Name is how the principal is shown when no person of the directory is
	// linked to it (a platform handle such as @ana); may be empty.
	Name string

	// Role and Agents, for API keys: what the key may do, and on which
	// agents (empty = all).
	Role   Role
	Agents []string

	// User is the platform's user id of a chat principal ("" for keys).
	User string
	// Groups are group or role ids the principal is known to belong to
	// (Discord roles come with the click).
	Groups []string
	// MemberOf, when set, answers whether the principal belongs to a group
	// the platform knows (Slack user groups); it is asked only about groups
	// a policy names.
	MemberOf func(ctx context.Context, group string) (bool, error)
	// Place is where a chat click happened; nil for every other route.
	Place *Place
}

// KeyPrincipal is the principal of API key name with role.
func KeyPrincipal(name string, role Role, agents []string, route string) Principal {
	p := Principal{ID: "key:" + name, Route: route, Name: name, Role: role, Agents: agents}
	if name == "" {
		p.ID = ""
	}
	return p
}

// ChatPrincipal is the principal of platform user user (in Slack team
// workspace), acting through that platform.
func ChatPrincipal(platform, workspace, user, name string) Principal {
	id := platform + ":" + user
	if platform == RouteSlack && workspace != "" {
		id = platform + ":" + workspace + "/" + user
	}
	if user == "" {
		id = ""
	}
	return Principal{ID: id, Route: platform, Name: name, User: user}
}

// IsKey reports whether p is an API key.
func (p Principal) IsKey() bool { return strings.HasPrefix(p.ID, "key:") }

// MayUseAgent reports whether p may act on agent's runs.
func (p Principal) MayUseAgent(agent string) bool {
	return len(p.Agents) == 0 || slices.Contains(p.Agents, agent)
}

// Person links one person's platform ids and API keys (people: in the config).
type Person struct {
	Name     string
	Slack    []string // U123 (any workspace) or T1/U123
	Discord  []string
	Telegram []string
	Keys     []string // API key names
}

// Directory is the people of the config, to name principals and to match
// approvers that name a person.
type Directory struct {
	byID map[string]string // principal id (or slack:<user>) → person
}

// NewDirectory indexes people.
func NewDirectory(people []Person) *Directory {
	d := &Directory{byID: map[string]string{}}
	for _, p := range people {
		for _, id := range p.Slack {
			if team, user, ok := strings.Cut(id, "/"); ok {
				d.byID["slack:"+team+"/"+user] = p.Name
			} else {
				d.byID["slack:"+id] = p.Name
			}
		}
		for _, id := range p.Discord {
			d.byID["discord:"+id] = p.Name
		}
		for _, id := range p.Telegram {
			d.byID["telegram:"+id] = p.Name
		}
		for _, k := range p.Keys {
			d.byID["key:"+k] = p.Name
		}
	}
	return d
}

// Person returns the person linked to principal id, "" when none.
func (d *Directory) Person(id string) string {
	if d == nil || id == "" {
		return ""
	}
	if name, ok := d.byID[id]; ok {
		return name
	}
	if rest, ok := strings.CutPrefix(id, "slack:"); ok {
		if _, user, ok := strings.Cut(rest, "/"); ok {
			return d.byID["slack:"+user]
		}
	}
	return ""
}

// Same reports whether principal ids a and b are one person: the same id,
// or ids the directory links to one person.
func (d *Directory) Same(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if a == b {
		return true
	}
	pa := d.Person(a)
	return pa != "" && pa == d.Person(b)
}

// Display is how principal p is shown: the linked person's name, else its
// own name, else "" (the platform renders its user id as a mention).
func (d *Directory) Display(p Principal) string {
	if name := d.Person(p.ID); name != "" {
		return name
	}
	if p.IsKey() {
		return p.Name + " (API key)"
	}
	return p.Name
}
