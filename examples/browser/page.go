package main

import (
	"embed"
	"html/template"
	"net/http"
)

//go:embed page
var pageFiles embed.FS

var pageTemplate = template.Must(template.ParseFS(pageFiles, "page/index.html"))

// newPage serves the payment page, which sends its payments to the API at
// apiURL: another origin than the page's own, so that the browser applies
// CORS to every request of the page.
func newPage(apiURL string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_ = pageTemplate.Execute(w, struct{ API string }{apiURL})
	})
	mux.HandleFunc("GET /pay.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		http.ServeFileFS(w, r, pageFiles, "page/pay.js")
	})
	return mux
}
