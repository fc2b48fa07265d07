// Command composecheck loads a compose file the way `docker compose config`
// does (compose-go: the Compose Specification's schema, interpolation,
// merge keys, normalization) and then checks what agentgate's scale-out
// needs of it:
//
//   - every agentgate service (one that runs the image agentgate:… or is
//     built here) has a health check, waits for each service it depends on
//     to be healthy, and publishes its ports on loopback only;
//   - its AGENTGATE_DATABASE_URL and AGENTGATE_REDIS_URL name services of the
//     file, each of which has a health check;
//   - each replica has its own AGENTGATE_NODE_ID, and two or more replicas
//     share one database and one Redis (otherwise they are not one gateway).
//
// deploy/check.sh runs it when no compose CLI is installed:
//
//	go -C deploy/composecheck run . ../../docker-compose.yaml
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: composecheck COMPOSE_FILE")
		os.Exit(2)
	}
	if err := run(context.Background(), os.Args[1], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "composecheck:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, file string, out io.Writer) error {
	p, err := load(ctx, file)
	if err != nil {
		return err
	}
	problems := check(p)
	if len(problems) > 0 {
		return fmt.Errorf("%s:\n  %s", file, strings.Join(problems, "\n  "))
	}
	names := p.ServiceNames()
	sort.Strings(names)
	fmt.Fprintf(out, "%s: ok (services %s)\n", file, strings.Join(names, ", "))
	return nil
}

// load reads file as `docker compose config` would, with this process's
// environment and the .env beside the file.
func load(ctx context.Context, file string) (*types.Project, error) {
	opts, err := cli.NewProjectOptions([]string{file},
		cli.WithOsEnv, cli.WithDotEnv, cli.WithName("agentgate"))
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(ctx)
}

// check returns what the project lacks for agentgate, one line each.
func check(p *types.Project) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var gateways []types.ServiceConfig
	for _, s := range p.Services {
		if s.Build != nil || strings.HasPrefix(s.Image, "agentgate:") || strings.Contains(s.Image, "/agentgate:") {
			gateways = append(gateways, s)
		}
	}
	sort.Slice(gateways, func(i, j int) bool { return gateways[i].Name < gateways[j].Name })
	if len(gateways) == 0 {
		return []string{"no agentgate service (image agentgate:… or a build)"}
	}
	healthy := func(name string) bool {
		s, ok := p.Services[name]
		return ok && s.HealthCheck != nil && !s.HealthCheck.Disable && len(s.HealthCheck.Test) > 0
	}
	nodes := map[string]string{}
	stores := map[string]bool{}
	for _, g := range gateways {
		if !healthy(g.Name) {
			bad("%s: no health check (test: [\"CMD\", \"/agentgate\", \"health\"])", g.Name)
		}
		for dep, d := range g.DependsOn {
			if d.Condition != types.ServiceConditionHealthy {
				bad("%s: depends on %s without condition: service_healthy", g.Name, dep)
			}
		}
		for _, port := range g.Ports {
			if port.Published != "" && port.HostIP != "127.0.0.1" && port.HostIP != "::1" {
				bad("%s: port %s published on %q, not on loopback (127.0.0.1:%s:%d)",
					g.Name, port.Published, port.HostIP, port.Published, port.Target)
			}
		}
		env := func(k string) string {
			if v := g.Environment[k]; v != nil {
				return *v
			}
			return ""
		}
		var store []string
		for _, k := range []string{"AGENTGATE_DATABASE_URL", "AGENTGATE_REDIS_URL"} {
			v := env(k)
			if v == "" {
				if len(gateways) > 1 {
					bad("%s: %s is not set; replicas need PostgreSQL and Redis", g.Name, k)
				}
				continue
			}
			host, err := serviceHost(v)
			if err != nil {
				bad("%s: %s: %v", g.Name, k, err)
				continue
			}
			if _, ok := p.Services[host]; ok {
				if !healthy(host) {
					bad("%s: %s names service %s, which has no health check", g.Name, k, host)
				}
				if _, waits := g.DependsOn[host]; !waits {
					bad("%s: %s names service %s, which it does not depend on", g.Name, k, host)
				}
			}
			store = append(store, v)
		}
		stores[strings.Join(store, " ")] = true
		id := env("AGENTGATE_NODE_ID")
		if other, dup := nodes[id]; dup && id != "" {
			bad("%s and %s share AGENTGATE_NODE_ID %s", other, g.Name, id)
		}
		if id == "" && len(gateways) > 1 {
			bad("%s: AGENTGATE_NODE_ID is not set; give each replica its own", g.Name)
		}
		nodes[id] = g.Name
	}
	if len(stores) > 1 {
		bad("the agentgate services use different databases or Redis; replicas of one gateway share both")
	}
	return problems
}

// serviceHost is the host a store URL connects to.
func serviceHost(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if u.Hostname() == "" {
		return "", errors.New("the URL names no host")
	}
	return u.Hostname(), nil
}
