package server

import (
	"encoding/json"
	"regexp"

	"github.com/gofiber/fiber/v2"
)

// UsageStore keeps usage statistics per API key, model and day. store/
// implements it (cmd wires it through Config.Usage); without one the usage
// endpoint answers 404 and nothing is recorded.
type UsageStore interface {
	// AddUsage adds counts to today's row of apiKey (stored only as a
	// digest label) and model.
	AddUsage(apiKey, model string, u UsageCounts) error
	// QueryUsage returns JSON-encodable rows matching q.
	QueryUsage(q UsageQuery) (any, error)
}

// UsageCounts is one request's contribution to the statistics.
type UsageCounts struct {
	Requests, Errors                             int64
	PromptTokens, CompletionTokens, CachedTokens int64
}

// UsageQuery filters usage rows: days From..To (YYYY-MM-DD, inclusive, ""
// open), a model, and either a key label or, for a client authenticated with
// an API key, that key (which restricts the rows to its own).
type UsageQuery struct {
	From, To, Model string
	KeyLabel        string
	APIKey          string
}

// recordUsage adds one finished request to the usage statistics. A failing
// store does not fail the request.
func (s *Server) recordUsage(apiKey string, e *LogEntry) {
	if s.cfg.Usage == nil {
		return
	}
	u := UsageCounts{Requests: 1, PromptTokens: int64(e.PromptTokens), CompletionTokens: int64(e.CompletionTokens), CachedTokens: int64(e.CachedTokens)}
	if e.Status >= 400 || e.Error != nil {
		u.Errors = 1
	}
	_ = s.cfg.Usage.AddUsage(apiKey, s.modelName, u)
}

// logRequest writes a finished request's log line and adds it to the usage
// statistics.
func (s *Server) logRequest(e *LogEntry) {
	s.reqlog.write(e)
	s.recordUsage(e.apiKey, e)
}

var usageDay = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

// handleUsage serves GET /v1/usage (Infernix's own endpoint): usage rows per
// day, API key label and model, filtered by the query parameters from, to
// (YYYY-MM-DD, inclusive), model and key (a label). A client that uses an API
// key sees only its own rows.
func (s *Server) handleUsage(c *fiber.Ctx) error {
	if s.cfg.Usage == nil {
		return notFound("usage statistics need a data directory (start the server with --data-dir DIR)")
	}
	q := UsageQuery{From: c.Query("from"), To: c.Query("to"), Model: c.Query("model"), KeyLabel: c.Query("key"), APIKey: requestKey(c)}
	for _, d := range []struct{ param, day string }{{"from", q.From}, {"to", q.To}} {
		if d.day != "" && !usageDay.MatchString(d.day) {
			return badRequest(d.param, "%s must be a day written YYYY-MM-DD, got %s", d.param, quote(d.day))
		}
	}
	rows, err := s.cfg.Usage.QueryUsage(q)
	if err != nil {
		return err
	}
	b, err := json.Marshal(struct {
		Object string `json:"object"`
		Data   any    `json:"data"`
	}{"list", rows})
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(b)
}
