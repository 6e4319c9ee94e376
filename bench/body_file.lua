-- The wrk script of bench/ab_http.sh: POSTs, on every connection, the JSON
-- body held in the file named after wrk's "--" (read once per thread).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
function init(args)
    local f = assert(io.open(args[1], "rb"))
    wrk.body = f:read("*a")
    f:close()
end
