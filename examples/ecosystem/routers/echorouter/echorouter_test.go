package echorouter_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemgo/idem/examples/ecosystem/internal/routertest"
	"github.com/idemgo/idem/examples/ecosystem/internal/testdb"
	"github.com/idemgo/idem/examples/ecosystem/routers/echorouter"
	"github.com/idemgo/idem/idemhttp"
)

func TestOrders(t *testing.T) {
	t.Parallel()
	db := testdb.OpenT(t)
	routertest.Run(t, echorouter.Routes(routertest.ProtectT(t, testdb.StoreT(t), db.DB)), db)
}

// TestReturnedError shows AnswerErrors at work: the 400 that the handler
// returns as an error is the response the middleware stores and replays.
func TestReturnedError(t *testing.T) {
	t.Parallel()
	db := testdb.OpenT(t)
	h := echorouter.Routes(routertest.ProtectT(t, testdb.StoreT(t), db.DB))
	first := routertest.Post(t, h, "/orders", "order-1", `{"item":""}`)
	retry := routertest.Post(t, h, "/orders", "order-1", `{"item":""}`)
	if first.Status != http.StatusBadRequest || retry.Status != http.StatusBadRequest ||
		string(retry.Body) != string(first.Body) || retry.Header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Errorf("first %d %s, retry %d %s %v; want 400 replayed", first.Status, first.Body, retry.Status, retry.Body, retry.Header)
	}
}

// TestWithoutAnswerErrors shows what AnswerErrors prevents: behind
// echo.WrapMiddleware alone, a returned error is answered after the
// middleware has stored and sent an empty 200, so the client never sees
// the 400 and its retries replay the empty 200.
func TestWithoutAnswerErrors(t *testing.T) {
	t.Parallel()
	db := testdb.OpenT(t)
	e := echo.New()
	refuse := func(echo.Context) error { return echo.NewHTTPError(http.StatusBadRequest, "no") }
	e.POST("/orders", refuse, echo.WrapMiddleware(routertest.ProtectT(t, testdb.StoreT(t), db.DB).Handler))
	first := routertest.Post(t, e, "/orders", "order-1", `{}`)
	retry := routertest.Post(t, e, "/orders", "order-1", `{}`)
	if first.Status != http.StatusOK || len(first.Body) != 0 || retry.Status != http.StatusOK || retry.Header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Errorf("first %d %q, retry %d %q: echo's handling of returned errors changed; revisit AnswerErrors",
			first.Status, first.Body, retry.Status, retry.Body)
	}
}
