// Package ginrouter mounts the idemhttp middleware in a
// github.com/gin-gonic/gin router, through Wrap, a small adapter for
// net/http middleware that may run its handler more than once.
package ginrouter

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/idemgo/idem/examples/ecosystem/internal/shop"
	"github.com/idemgo/idem/idemhttp"
)

// Routes returns a router whose POST /orders is made idempotent by mw (see
// shop.Protect).
func Routes(mw *idemhttp.Middleware) *gin.Engine {
	r := gin.New()
	r.Use(gin.Recovery())
	r.POST("/orders", Wrap(mw.Handler, createOrder))
	return r
}

// createOrder is a gin handler. It writes the order in the request's
// transaction, which it finds in c.Request's context (gin.Context's own
// Value does not look there unless the engine's ContextWithFallback is
// set), and answers 201; the middleware commits, and only then sends the
// answer.
func createOrder(c *gin.Context) {
	var req struct {
		Item string `json:"item" binding:"required"`
	}
	if err := c.ShouldBindJSON(&req); err != nil {
		// Refuse before writing anything: a 4xx is stored, with
		// whatever was written in the transaction.
		c.JSON(http.StatusBadRequest, gin.H{"error": `want {"item": "..."}`})
		return
	}
	ctx := c.Request.Context()
	o, err := shop.CreateOrder(ctx, idemhttp.Tx(ctx), req.Item)
	if err != nil {
		// A 5xx is not stored: the transaction rolls back, and the
		// client's retry runs the handler again.
		c.JSON(http.StatusInternalServerError, gin.H{"error": "could not place the order"})
		return
	}
	c.Header("Location", "/orders/"+strconv.FormatInt(o.ID, 10))
	c.JSON(http.StatusCreated, o)
}
