package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentgate/agentgate/core"
	"github.com/agentgate/agentgate/core/config"
	"github.com/agentgate/agentgate/interfaces/discord"
	"github.com/agentgate/agentgate/interfaces/slack"
	"github.com/agentgate/agentgate/interfaces/telegram"
	"github.com/agentgate/agentgate/store/postgres"
	"github.com/agentgate/agentgate/store/sqlite"
)

// Check is one line of Doctor: what was checked, whether it holds, what
// was seen and, when it does not hold, what to do.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // CheckOK, CheckWarn or CheckFail
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Check statuses.
const (
	CheckOK   = "ok"
	CheckWarn = "warn"
	CheckFail = "fail"
)

// doctorTimeout bounds each check that goes over the network.
const doctorTimeout = 5 * time.Second

// maxSkew is the clock difference with the database that is reported.
const maxSkew = 2 * time.Second

// Doctor checks what a gateway of s needs, without starting one or
// changing anything: the config, each model's provider and key, each chat
// platform's token, the store (reachable, migrated, the clock beside it),
// Redis, and the data dir (writable, not locked by a running gateway).
func Doctor(ctx context.Context, s Settings) []Check {
	s = s.withDefaults()
	var out []Check
	add := func(name, status, detail, fix string) {
		out = append(out, Check{Name: name, Status: status, Detail: detail, Fix: fix})
	}
	cfg, problems := CheckConfig(s)
	name := "the built-in demo config"
	if s.ConfigPath != "" {
		name = s.ConfigPath
	}
	if len(problems) > 0 {
		for _, p := range problems {
			add("config", CheckFail, p, "fix the file (agentgate config check lists every problem)")
		}
	} else {
		add("config", CheckOK, fmt.Sprintf("%s: agents %s", name, joinNames(sortedNames(cfg.Agents))), "")
	}
	if cfg != nil && len(problems) == 0 {
		out = append(out, doctorModels(ctx, cfg)...)
		out = append(out, doctorPlatforms(ctx, cfg)...)
	}
	out = append(out, doctorStore(ctx, s)...)
	return out
}

func joinNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func doctorModels(ctx context.Context, cfg *config.Config) []Check {
	built, err := buildAgents(cfg, core.SystemClock{}, slog.New(slog.DiscardHandler))
	if err != nil {
		return []Check{{Name: "models", Status: CheckFail, Detail: err.Error(), Fix: "fix the agents' models in the config"}}
	}
	defer built.close()
	var out []Check
	for i, err := range built.askProviders(ctx) {
		c := built.checks[i]
		ch := Check{Name: "model " + c.path, Status: CheckOK, Detail: c.name + ": key accepted, model known"}
		switch {
		case errors.Is(err, core.ErrModelRefused):
			ch.Status, ch.Detail, ch.Fix = CheckFail, c.name+": "+err.Error(), "set a valid api_key (or the provider's key variable) and model name"
		case err != nil:
			ch.Status, ch.Detail, ch.Fix = CheckWarn, c.name+": could not ask the provider: "+err.Error(), "check base_url and the network; runs retry while it is down"
		}
		out = append(out, ch)
	}
	return out
}

// doctorPlatforms asks each configured chat platform who its token is.
func doctorPlatforms(ctx context.Context, cfg *config.Config) []Check {
	var out []Check
	log := slog.New(slog.DiscardHandler)
	token := func(name, env, fix string, check func(ctx context.Context, token string) (string, error)) {
		t := os.Getenv(env)
		if t == "" {
			out = append(out, Check{Name: name, Status: CheckFail, Detail: env + " is not set", Fix: fix})
			return
		}
		cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
		defer cancel()
		who, err := check(cctx, t)
		if err != nil {
			out = append(out, Check{Name: name, Status: CheckFail, Detail: env + " was refused or the API not reached: " + err.Error(), Fix: fix})
			return
		}
		out = append(out, Check{Name: name, Status: CheckOK, Detail: who})
	}
	if cfg.Interfaces.Slack != nil {
		token("slack token", "SLACK_BOT_TOKEN", "set SLACK_BOT_TOKEN to the app's bot token, xoxb-… (OAuth & Permissions), and reinstall the app if it was revoked",
			func(ctx context.Context, t string) (string, error) {
				c, err := slack.NewClient(slack.ClientConfig{Token: t, APIURL: os.Getenv("SLACK_API_URL"), Logger: log})
				if err != nil {
					return "", err
				}
				who, err := c.AuthTest(ctx)
				if err != nil {
					return "", err
				}
				return fmt.Sprintf("auth.test: team %s, bot user %s", who.TeamID, who.UserID), nil
			})
	}
	if cfg.Interfaces.Telegram != nil {
		token("telegram token", "TELEGRAM_BOT_TOKEN", "set TELEGRAM_BOT_TOKEN to the token @BotFather gave the bot (123456:ABC-…)",
			func(ctx context.Context, t string) (string, error) {
				c, err := telegram.NewClient(telegram.ClientConfig{Token: t, APIURL: os.Getenv("TELEGRAM_API_URL"), Logger: log})
				if err != nil {
					return "", err
				}
				me, err := c.Me(ctx)
				if err != nil {
					return "", err
				}
				return "getMe: @" + me.Username, nil
			})
	}
	if cfg.Interfaces.Discord != nil {
		token("discord token", "DISCORD_BOT_TOKEN", "set DISCORD_BOT_TOKEN to the bot's token (Developer Portal → Bot → Reset Token)",
			func(ctx context.Context, t string) (string, error) {
				c, err := discord.NewClient(discord.ClientConfig{Token: t, APIURL: os.Getenv("DISCORD_API_URL"), Logger: log})
				if err != nil {
					return "", err
				}
				me, err := c.Me(ctx)
				if err != nil {
					return "", err
				}
				return "users/@me: " + me.Username, nil
			})
	}
	return out
}

// doctorStore checks the store and the queue s names, without migrating.
func doctorStore(ctx context.Context, s Settings) []Check {
	var out []Check
	add := func(name, status, detail, fix string) {
		out = append(out, Check{Name: name, Status: status, Detail: detail, Fix: fix})
	}
	cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	switch {
	case s.DatabaseURL != "":
		v, dbNow, err := postgres.Inspect(cctx, s.DatabaseURL, s.DatabaseSchema)
		if errors.Is(err, postgres.ErrBadURL) {
			add("database", CheckFail, "AGENTGATE_DATABASE_URL: not a valid postgres:// URL or key=value string (the text is not shown: it may hold a password)",
				"write it as postgres://user:password@host:5432/dbname, percent-encoding special characters in the password")
			break
		}
		if err != nil {
			add("database", CheckFail, "PostgreSQL not reached: "+err.Error(), "start PostgreSQL or fix AGENTGATE_DATABASE_URL (postgres://user:pw@host:5432/db)")
			break
		}
		add("database", CheckOK, "PostgreSQL reached", "")
		out = append(out, migrated(v, postgres.LatestVersion(), "PostgreSQL"))
		skew := time.Since(dbNow).Round(time.Millisecond)
		if skew > maxSkew || skew < -maxSkew {
			add("clock", CheckWarn, fmt.Sprintf("this host's clock is %s off the database's", skew), "sync the clock (NTP): claims, leases and approval expiries compare times across replicas")
		} else {
			add("clock", CheckOK, fmt.Sprintf("within %s of the database's", skew.Abs()), "")
		}
	case s.RedisURL != "":
		add("database", CheckFail, "AGENTGATE_REDIS_URL is set without AGENTGATE_DATABASE_URL", "set AGENTGATE_DATABASE_URL, or unset AGENTGATE_REDIS_URL to use the embedded store")
	default:
		out = append(out, doctorDataDir(cctx, s.DataDir)...)
	}
	if s.RedisURL != "" {
		opt, err := redis.ParseURL(s.RedisURL)
		if err != nil {
			// go-redis's error quotes the URL, password included.
			add("redis", CheckFail, "AGENTGATE_REDIS_URL: not a valid redis:// URL (the text is not shown: it may hold a password)",
				"write it as redis://[user:password@]host:6379/0, percent-encoding special characters in the password")
			return out
		}
		c := redis.NewClient(opt)
		defer c.Close()
		if err := c.Ping(cctx).Err(); err != nil {
			add("redis", CheckFail, "Redis at "+opt.Addr+" not reached: "+err.Error(), "start Redis or fix AGENTGATE_REDIS_URL")
		} else {
			add("redis", CheckOK, "Redis at "+opt.Addr+" answers", "")
		}
	}
	return out
}

// dirInUseError: another process holds the data dir's lock (pid: what it
// wrote in the lock file, "" when unknown).
type dirInUseError struct{ dir, pid string }

func (e *dirInUseError) Error() string {
	return "data dir " + e.dir + " is in use by " + e.holder() + "; stop it, or give this one another --data-dir"
}

// holder names the process that holds the lock.
func (e *dirInUseError) holder() string {
	if e.pid == "" {
		return "another agentgate"
	}
	return "another agentgate (pid " + e.pid + ")"
}

// doctorDataDir checks the embedded store's directory: writable, its lock,
// its database's version.
func doctorDataDir(ctx context.Context, dir string) []Check {
	var out []Check
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		// serve creates it: its parent must take it.
		parent := filepath.Dir(filepath.Clean(dir))
		f, err := os.CreateTemp(parent, ".doctor-*")
		if err != nil {
			return append(out, Check{Name: "data dir", Status: CheckFail, Detail: dir + " does not exist and " + parent + " is not writable: " + err.Error(),
				Fix: "create it, or give --data-dir / AGENTGATE_DATA_DIR a writable directory"})
		}
		f.Close()
		os.Remove(f.Name())
		return append(out, Check{Name: "data dir", Status: CheckOK, Detail: dir + " does not exist yet; serve creates it"})
	}
	f, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		return append(out, Check{Name: "data dir", Status: CheckFail, Detail: dir + " is not writable: " + err.Error(), Fix: "make it writable by this user, or give another --data-dir"})
	}
	f.Close()
	os.Remove(f.Name())
	lock := Check{Name: "data dir", Status: CheckOK, Detail: dir + ": writable, not in use"}
	unlock, err := lockDataDir(dir)
	inUse, held := errors.AsType[*dirInUseError](err)
	switch {
	case held: // a running gateway: fine for a check
		lock.Detail = dir + ": writable, in use by " + inUse.holder()
	case err != nil:
		lock = Check{Name: "data dir", Status: CheckFail, Detail: err.Error(), Fix: "make " + filepath.Join(dir, "agentgate.lock") + " writable by this user"}
	default:
		unlock()
	}
	out = append(out, lock)
	v, err := sqlite.Inspect(ctx, filepath.Join(dir, "agentgate.db"))
	if err != nil {
		return append(out, Check{Name: "store", Status: CheckFail, Detail: err.Error(), Fix: "restore agentgate.db from a backup (agentgate backup)"})
	}
	return append(out, migrated(v, sqlite.LatestVersion(), "SQLite"))
}

func migrated(have, want int, what string) Check {
	switch {
	case have == want:
		return Check{Name: "schema", Status: CheckOK, Detail: fmt.Sprintf("%s schema at version %d, this build's", what, have)}
	case have == 0:
		return Check{Name: "schema", Status: CheckWarn, Detail: what + " has no schema yet", Fix: "serve creates it at start (or run agentgate migrate)"}
	case have < want:
		return Check{Name: "schema", Status: CheckWarn, Detail: fmt.Sprintf("%s schema at version %d, this build has %d", what, have, want), Fix: "serve migrates at start (or run agentgate migrate)"}
	}
	return Check{Name: "schema", Status: CheckFail, Detail: fmt.Sprintf("%s schema at version %d, newer than this build's %d", what, have, want), Fix: "run the newer agentgate, or revert the schema (agentgate migrate --down-to on PostgreSQL)"}
}
