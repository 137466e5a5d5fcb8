package server

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/gofiber/fiber/v2"
)

// APIError is an error answered to the client in OpenAI's shape:
// {"error":{"message","type","param","code"}}. Every client mistake is one
// (4xx, naming the field in Param and Message); anything else reaching the
// error handler is a 500.
type APIError struct {
	Status     int
	Message    string
	Type       string // invalid_request_error, authentication_error, …
	Param      string // the JSON field at fault ("" → null)
	Code       string // "" → null
	RetryAfter int    // seconds, for 429 and 503
}

func (e *APIError) Error() string { return e.Message }

// badRequest is a 400 naming param.
func badRequest(param, format string, args ...any) *APIError {
	return &APIError{Status: 400, Message: fmt.Sprintf(format, args...), Type: "invalid_request_error", Param: param}
}

// fieldError is a 400 whose message starts with the field name, the form
// every decoder uses ("max_tokens must be an integer").
func fieldError(param, format string, args ...any) *APIError {
	return badRequest(param, param+" "+format, args...)
}

func notFound(msg string) *APIError {
	return &APIError{Status: 404, Message: msg, Type: "invalid_request_error", Code: "not_found"}
}

var errUnauthorized = &APIError{Status: 401, Type: "authentication_error", Code: "invalid_api_key",
	Message: "invalid or missing API key: send it as 'Authorization: Bearer KEY' or 'x-api-key: KEY'"}

// appendErrorJSON appends the OpenAI error object for e.
func appendErrorJSON(b []byte, e *APIError) []byte {
	b = append(b, `{"error":{"message":`...)
	b = appendString(b, e.Message)
	b = append(b, `,"type":`...)
	b = appendString(b, e.Type)
	b = append(b, `,"param":`...)
	b = appendNullableString(b, e.Param)
	b = append(b, `,"code":`...)
	if e.Code == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, e.Code)
	}
	return append(b, "}}"...)
}

// sendError writes e as the response.
func sendError(c *fiber.Ctx, e *APIError) error {
	if e.RetryAfter > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(e.RetryAfter))
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	return c.Status(e.Status).Send(appendErrorJSON(nil, e))
}

// asAPIError maps any error to what the client sees: API errors as they
// are, Fiber's own (unknown route, body too large, bad method) with their
// status, anything else a 500 that does not leak internals beyond the text.
func asAPIError(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		e := &APIError{Status: fe.Code, Message: fe.Message, Type: "invalid_request_error"}
		switch fe.Code {
		case fiber.StatusNotFound:
			e.Code = "not_found"
			e.Message = "no such endpoint"
		case fiber.StatusRequestEntityTooLarge:
			e.Message = "the request body is larger than the server's limit (--max-body-mb)"
			e.Code = "request_too_large"
		case fiber.StatusMethodNotAllowed:
			e.Code = "method_not_allowed"
		}
		if fe.Code >= 500 {
			e.Type = "server_error"
		}
		return e
	}
	return &APIError{Status: 500, Message: err.Error(), Type: "server_error"}
}
