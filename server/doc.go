// Package server is Infernix's HTTP server: an OpenAI-compatible API (chat
// completions, completions, models, tokenize/detokenize, apply-template,
// health, metrics) on Fiber v2 over an *engine.Engine.
//
// Layout:
//   - handlers decode and validate a request (decode*.go, chatreq.go,
//     complreq.go; errors name the JSON field) into an API-neutral job;
//   - the generation core (core.go, pipeline.go) submits the job to the
//     scheduler and turns its token events into output events: reasoning
//     text, content text, tool-call start/argument fragments, log-probs,
//     and a final result with usage and timings;
//   - per-API encoders (openai_*.go) write those events as JSON or as SSE
//     chunks built with a small appender (jsonw.go), never through
//     reflection per token.
//
// Other APIs (Anthropic Messages, OpenAI Responses) plug in as further
// decoders and encoders over the same core.
//
// The engine runs model work on one device goroutine; the server never blocks
// it: every request's event channel is drained by its own handler goroutine,
// and a slow client only stalls its own lane (the scheduler skips lanes whose
// consumer is behind).
package server
