-- The wrk script of bench/http.sh and bench/ab_http.sh: the 我爱你 request
-- on demo-4d, POSTed on every connection.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"demo-4d","tokens":["我","爱","你"],"embeddings":[[0.1,-0.2,0.3,0.1],[-0.1,0.2,0.2,-0.3],[0.2,0.1,-0.1,0.2]]}'
