// Package echorouter mounts the idemhttp middleware in a
// github.com/labstack/echo/v4 router, through echo.WrapMiddleware.
//
// WrapMiddleware hands the handler the middleware's request and writer, so
// what the handler writes with c.JSON is held back until the commit, and
// c.Request().Context() carries the transaction. What it does not do is
// answer the handler's returned error in time: it returns the error after
// the middleware has already stored and committed the empty response the
// handler left, and echo's error handler then writes into a writer nobody
// reads. So protected handlers must write every answer themselves, or sit
// behind AnswerErrors, which makes echo answer the error while the
// middleware still holds the response.
package echorouter

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/idemgo/idem/examples/ecosystem/internal/shop"
	"github.com/idemgo/idem/idemhttp"
)

// Routes returns a router whose POST /orders is made idempotent by mw (see
// shop.Protect).
func Routes(mw *idemhttp.Middleware) *echo.Echo {
	e := echo.New()
	// Route middleware runs in order, the first outermost: the
	// idemhttp middleware around AnswerErrors around the handler.
	e.POST("/orders", createOrder, echo.WrapMiddleware(mw.Handler), AnswerErrors)
	return e
}

// AnswerErrors is echo middleware that answers a handler's error with
// echo's HTTPErrorHandler right away, into the writer the handler was
// given, and returns nil. Put it inside echo.WrapMiddleware: there, the
// answer reaches the idemhttp middleware, which stores a 4xx, rolls back on
// a 5xx, and sends either, instead of storing an empty 200.
func AnswerErrors(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := next(c); err != nil {
			c.Error(err)
		}
		return nil
	}
}

// createOrder is an echo handler. It writes the order in the request's
// transaction and answers 201; the middleware commits, and only then sends
// the answer.
func createOrder(c echo.Context) error {
	var req struct {
		Item string `json:"item"`
	}
	if err := c.Bind(&req); err != nil || req.Item == "" {
		// Refuse before writing anything: a 4xx is stored, with
		// whatever was written in the transaction.
		return echo.NewHTTPError(http.StatusBadRequest, `want {"item": "..."}`)
	}
	ctx := c.Request().Context()
	o, err := shop.CreateOrder(ctx, idemhttp.Tx(ctx), req.Item)
	if err != nil {
		// A 5xx is not stored: the transaction rolls back, and the
		// client's retry runs the handler again.
		return echo.NewHTTPError(http.StatusInternalServerError, "could not place the order").SetInternal(err)
	}
	c.Response().Header().Set("Location", "/orders/"+strconv.FormatInt(o.ID, 10))
	return c.JSON(http.StatusCreated, o)
}
