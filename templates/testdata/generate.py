#!/usr/bin/env python3
"""Writes errors.tsv: error messages in the style of many systems, each line
"<template id>\t<message>". The templates and the values are written here by
hand; the seed is fixed, so a rerun gives the same file.

    python3 templates/testdata/generate.py > templates/testdata/errors.tsv
"""
import random, string, uuid

R = random.Random(20261203)

def num(a=1, b=99999): return str(R.randint(a, b))
def hexs(n=12): return ''.join(R.choice('0123456789abcdef') for _ in range(n))
def uid(): return str(uuid.UUID(int=R.getrandbits(128)))
def ip(): return '.'.join(str(R.randint(1, 254)) for _ in range(4))
def port(): return str(R.choice([80, 443, 5432, 6379, 9092, 8080, 3306, 27017, R.randint(1024, 65535)]))
def host(): return R.choice(['db-primary', 'redis-cache', 'payments-api', 'kafka-broker', 'ledger-db', 'search']) + '-' + num(0, 9) + '.' + R.choice(['prod', 'eu1', 'us2']) + '.internal'
def dur(): return R.choice([num(1, 999) + 'ms', num(1, 59) + 's', num(1, 9) + '.' + num(0, 999) + 's', num(1, 30) + 'm' + num(0, 59) + 's'])
def ts(): return '2026-%02d-%02dT%02d:%02d:%02d.%03dZ' % (R.randint(1, 12), R.randint(1, 28), R.randint(0, 23), R.randint(0, 59), R.randint(0, 59), R.randint(0, 999))
def email(): return R.choice(['ana', 'bob.smith', 'c.lee', 'dmitri', 'eve+test']) + num(1, 999) + '@' + R.choice(['example.com', 'mail.org', 'corp.net'])
def word(): return R.choice(['alice', 'bob', 'carol', 'dave', 'erin', 'frank', 'grace', 'heidi', 'ivan', 'judy', 'mallory', 'oscar', 'peggy', 'trent', 'victor', 'walter'])
def table(): return R.choice(['orders', 'payments', 'customers', 'invoices', 'shipments', 'ledger_entries', 'refunds', 'coupons'])
def column(): return R.choice(['customer_id', 'order_id', 'email', 'sku', 'currency', 'amount', 'status'])
def path(): return '/' + '/'.join(R.choice(['var', 'lib', 'data', 'srv', 'app', 'tmp', 'cache', 'uploads', 'orders']) for _ in range(R.randint(2, 5))) + '/' + hexs(6) + R.choice(['.json', '.csv', '.parquet', ''])
def url(): return R.choice(['https://', 'http://']) + R.choice(['api.psp.example', 'hooks.partner.io', 'carrier.example.net', 'auth.example.com']) + '/' + R.choice(['v1', 'v2', 'api']) + '/' + R.choice(['charges', 'tokens', 'labels', 'webhooks']) + '/' + hexs(8)
def quoted_text(): return "'" + ' '.join(R.choice(['Main', 'St', 'apt', 'Rue', 'de', 'la', 'Paix', 'Unit', 'Block', 'North', 'Road', 'Ave']) for _ in range(R.randint(1, 4))) + "'"
def dq_text(): return '"' + ' '.join(R.choice(['blue', 'large', 'gift', 'wrap', 'express', 'bundle', 'promo', 'black', 'friday']) for _ in range(R.randint(1, 3))) + '"'
def klass(): return R.choice(['com.acme.orders.OrderService', 'com.acme.billing.InvoiceWriter', 'com.acme.shipping.LabelClient', 'org.example.ledger.PostingJob'])
def state(): return R.choice(['PENDING', 'PAID', 'CANCELLED', 'SHIPPED', 'REFUNDED', 'DELIVERED'])
def sku(): return 'SKU-' + num(10000, 99999)
def order(): return 'order-' + num(10000, 99999)
def node(): return R.choice(['cn', 'gpu', 'hm']) + num(1, 512).zfill(3)
def partition(): return num(0, 63)
def svc(): return R.choice(['payments', 'inventory', 'ledger', 'shipping', 'fraud', 'notifications'])
def pkg(): return R.choice(['com.acme.shop', 'com.acme.wallet', 'io.example.rides'])
def activity(): return R.choice(['CheckoutActivity', 'CartFragment', 'PaymentSheet', 'OrderDetailActivity'])
def signal(): return R.choice(['SIGSEGV', 'SIGKILL', 'SIGABRT', 'SIGBUS'])

T = {
 # Java exceptions
 'J1': lambda: f'java.lang.IllegalStateException: Order {order()} is in state {state()} and cannot be captured',
 'J2': lambda: f'java.net.SocketTimeoutException: Read timed out after {num(1000, 60000)} ms while calling {url()}',
 'J3': lambda: f'org.springframework.dao.DataIntegrityViolationException: could not execute statement; SQL [n/a]; constraint [{table()}_pkey]',
 'J4': lambda: f'java.lang.IllegalArgumentException: Invalid currency code: {R.choice(["XXX", "EURO", "usd", "YEN", "BTC"])}',
 'J5': lambda: f'javax.ws.rs.NotAuthorizedException: HTTP 401 Unauthorized for user {email()}',
 'J6': lambda: f'com.fasterxml.jackson.core.JsonParseException: Unexpected character (\'{R.choice("}]x,")}\' (code {num(40, 125)})): was expecting double-quote to start field name at [Source: (String)"{{...}}"; line: {num(1, 9)}, column: {num(1, 300)}]',
 'J7': lambda: f'java.util.concurrent.RejectedExecutionException: Task {klass()}$$Lambda${num(100, 999)}/0x{hexs(16)}@{hexs(8)} rejected from java.util.concurrent.ThreadPoolExecutor@{hexs(8)}[Running, pool size = {num(1, 64)}, active threads = {num(1, 64)}, queued tasks = {num(0, 10000)}, completed tasks = {num(0, 999999)}]',
 'J8': lambda: f'java.lang.OutOfMemoryError: Java heap space in thread "{R.choice(["kafka-consumer", "pool", "main", "http-nio"])}-{num(1, 40)}"',
 'J9': lambda: f'org.hibernate.StaleObjectStateException: Row was updated or deleted by another transaction (or unsaved-value mapping was incorrect) : [{klass()}#{num()}]',
 # Go errors
 'G1': lambda: f'dial tcp {ip()}:{port()}: connect: connection refused',
 'G2': lambda: f'read tcp {ip()}:{num(30000, 65000)}->{ip()}:{port()}: read: connection reset by peer',
 'G3': lambda: f'context deadline exceeded (Client.Timeout exceeded while awaiting headers) after {dur()}',
 'G4': lambda: f'open {path()}: no such file or directory',
 'G5': lambda: f'open {path()}: permission denied',
 'G6': lambda: f'json: cannot unmarshal {R.choice(["string", "number", "array", "object"])} into Go struct field {R.choice(["Order", "Payment", "Item"])}.{R.choice(["amount", "qty", "items", "currency", "customer"])} of type {R.choice(["int64", "string", "float64", "[]main.Item"])}',
 'G7': lambda: f'handler {R.choice(["ChargeOrder", "ReserveStock", "PostLedger", "CreateLabel"])}: order {order()}: lock not acquired within {dur()}',
 'G8': lambda: f'rpc error: code = {R.choice(["Unavailable", "DeadlineExceeded", "ResourceExhausted"])} desc = {R.choice(["transport is closing", "connection error", "quota exhausted"])}',
 'G9': lambda: f'lookup {host()} on {ip()}:53: no such host',
 # HTTP clients
 'H1': lambda: f'POST {url()} failed: unexpected status {R.choice(["500", "502", "400", "409", "422"])}',
 'H2': lambda: f'GET {url()}: x509: certificate has expired or is not yet valid: current time {ts()} is after {ts()}',
 'H3': lambda: f'requests.exceptions.ConnectionError: HTTPSConnectionPool(host=\'{host()}\', port={port()}): Max retries exceeded with url: /v1/charges/{hexs(10)} (Caused by NewConnectionError(\'<urllib3.connection.HTTPSConnection object at 0x{hexs(12)}>: Failed to establish a new connection: [Errno 111] Connection refused\'))',
 'H4': lambda: f'psp responded 429 Too Many Requests, retry after {num(1, 120)} seconds',
 'H5': lambda: f'webhook delivery to {url()} took {dur()}, over the {num(5, 30)}s budget',
 'H6': lambda: f'AxiosError: Request failed with status code {R.choice(["404", "500", "503"])} at {url()}',
 # Databases
 'D1': lambda: f'pq: duplicate key value violates unique constraint "{table()}_{column()}_key"',
 'D2': lambda: f'ERROR: deadlock detected DETAIL: Process {num(1000, 99999)} waits for ShareLock on transaction {num(100000, 9999999)}; blocked by process {num(1000, 99999)}.',
 'D3': lambda: f'ERROR 1205 (HY000): Lock wait timeout exceeded; try restarting transaction on table {table()}',
 'D4': lambda: f'pq: null value in column "{column()}" of relation "{table()}" violates not-null constraint',
 'D5': lambda: f'MongoServerError: E11000 duplicate key error collection: shop.{table()} index: {column()}_1 dup key: {{ {column()}: "{hexs(10)}" }}',
 'D6': lambda: "redis: OOM command not allowed when used memory > 'maxmemory'",
 'D10': lambda: 'redis: LOADING Redis is loading the dataset in memory',
 'D7': lambda: f'ORA-00060: deadlock detected while waiting for resource in session {num(1, 999)}',
 'D8': lambda: f'too many connections for role "{word()}" (max {num(10, 500)})',
 'D9': lambda: f'relation "{table()}" does not exist at character {num(10, 400)}',
 # Kernels
 'K1': lambda: f'Out of memory: Killed process {num(100, 65000)} ({R.choice(["java", "python3", "worker", "postgres"])}) total-vm:{num(100000, 9999999)}kB, anon-rss:{num(10000, 999999)}kB, file-rss:{num(0, 9999)}kB',
 'K2': lambda: f'EXT4-fs error (device {R.choice(["sda1", "nvme0n1p2", "dm-0"])}): ext4_find_entry:{num(1000, 2000)}: inode #{num(2, 999999)}: comm {R.choice(["java", "rsync", "tar"])}: reading directory lblock 0',
 'K3': lambda: f'nfs: server {host()} not responding, still trying',
 'K4': lambda: f'{R.choice(["worker", "java", "node"])}[{num(100, 65000)}]: segfault at {hexs(12)} ip {hexs(16)} sp {hexs(16)} error 4 in libc.so.6[{hexs(12)}+{hexs(6)}]',
 'K5': lambda: f'TCP: request_sock_TCP: Possible SYN flooding on port {port()}. Sending cookies.',
 # HPC schedulers
 'S1': lambda: f'slurmstepd: error: *** JOB {num(100000, 9999999)} ON {node()} CANCELLED AT {ts()} DUE TO TIME LIMIT ***',
 'S2': lambda: f'slurmstepd: error: Detected {num(1, 9)} oom-kill event(s) in StepId={num(100000, 999999)}.batch. Some of your processes may have been killed by the cgroup out-of-memory handler.',
 'S3': lambda: f'srun: error: {node()}: task {num(0, 127)}: Exited with exit code {num(1, 255)}',
 'S4': lambda: f'PBS: job killed: walltime {num(3600, 90000)} exceeded limit {num(3600, 86400)}',
 'S5': lambda: f'node {node()} state set to DRAIN: reason {R.choice(["NHC", "Kill task failed", "Epilog error", "Not responding"])}',
 # Mobile apps
 'M1': lambda: f'FATAL EXCEPTION: main Process: {pkg()}, PID: {num(1000, 32000)} java.lang.RuntimeException: Unable to start activity ComponentInfo{{{pkg()}/.{activity()}}}',
 'M2': lambda: f'ANR in {pkg()} ({pkg()}/.{activity()}) Reason: Input dispatching timed out ({R.choice(["Waiting to send non-key event", "Waiting because no window has focus"])})',
 'M3': lambda: f'NSURLErrorDomain Code=-{R.choice(["1001", "1009", "1004"])} "{R.choice(["The request timed out.", "The Internet connection appears to be offline.", "Could not connect to the server."])}" UserInfo={{NSErrorFailingURLStringKey={url()}}}',
 'M4': lambda: f'Fatal signal {R.choice(["11", "6", "7"])} ({signal()}), code {num(0, 2)}, fault addr 0x{hexs(8)} in tid {num(1000, 32000)} (RenderThread), pid {num(1000, 32000)} ({pkg()})',
 'M5': lambda: f'push token {hexs(64)} rejected by APNs: BadDeviceToken',
 # Message brokers / queues
 'Q1': lambda: f'kafka: error while producing to {R.choice(["orders", "payments", "audit"])}-{partition()}: NOT_LEADER_OR_FOLLOWER',
 'Q2': lambda: f'message {uid()} exceeded max delivery count {num(3, 20)}',
 'Q3': lambda: f'consumer group {R.choice(["order-workers", "ledger-writers"])} rebalancing, offset {num(0, 99999999)} on partition {partition()} not committed',
 'Q4': lambda: f'nack from {svc()}: message too large ({num(1048577, 9999999)} bytes > {R.choice(["1048576", "4194304"])})',
 # Business errors (words vary, no digits)
 'B1': lambda: f'fraud check rejected order {order()} (score 0.{num(80, 99)})',
 'B2': lambda: f'state machine: cannot transition order {order()} from {state()} to {state()}',
 'B3': lambda: f'coupon {R.choice(["BLACKFRIDAY", "WELCOME", "SPRING", "VIPONLY", "FREESHIP"])} expired before checkout completed',
 'B4': lambda: f'address {quoted_text()} rejected by carrier: PO boxes are not supported',
 'B5': lambda: f'user {word()} is not allowed to approve refunds above the limit',
 'B6': lambda: f'sku {sku()} out of stock in warehouse {R.choice(["berlin", "lyon", "dallas", "osaka"])}',
 'B7': lambda: f'customer {email()} has an unpaid invoice {hexs(8)} older than {num(30, 120)} days',
 'B8': lambda: f'gift message {dq_text()} contains blocked words',
 'B9': lambda: f'refund amount exceeds captured amount',
 'B10': lambda: f'payment declined by issuer: {R.choice(["do_not_honor", "insufficient_funds", "card_velocity_exceeded", "lost_card"])}',
 'B11': lambda: f'tenant {R.choice(["acme", "globex", "initech", "umbrella"])} exceeded its plan quota of {num(100, 9999)} orders per hour',
 'B12': lambda: f'duplicate submission of order {order()} within {dur()}',
 # Near neighbours that must stay apart
 'N1': lambda: f'connection refused by {host()}',
 'N2': lambda: f'connection reset by {host()}',
 'N3': lambda: f'upstream {svc()} returned an empty body',
 'N4': lambda: f'upstream {svc()} returned a malformed body',
 'N5': lambda: f'invoice {hexs(8)} already paid',
 'N6': lambda: f'invoice {hexs(8)} already voided',
 'N7': lambda: f'retry budget exhausted for {svc()} after {num(2, 9)} attempts over {dur()}',
 'N8': lambda: f'circuit breaker open for {svc()} after {num(2, 99)} failures in {dur()}',
}

ids = sorted(T)
weights = {k: R.choice([3, 6, 12, 25, 40]) for k in ids}
lines = []
for k in ids:
    for _ in range(weights[k]):
        lines.append((k, T[k]()))
R.shuffle(lines)
print('# Error messages of many systems with their true templates: generate.py wrote them; see it for the templates.')
for k, m in lines:
    print(f'{k}\t{m}')
