#!/usr/bin/env python3
"""Writes dlqerrors.tsv: the last_error texts that dead letters carry, as the
clients and frameworks of Java, Go, Python, Node and .NET services write them
(HTTP clients, databases, brokers, cloud SDKs, validation, business rules),
each line "<true kind>\t<message>". The seed is fixed, so a rerun gives the
same file.

    python3 templates/testdata/generate_dlq.py > templates/testdata/dlqerrors.tsv

How the kinds are written: two errors are one kind when an operator would
handle them as one failure. The variable parts
are what the product masks by definition: IDs, numbers (status codes, error
numbers and counts included), hosts, addresses, URLs, paths, times and
durations, quoted values; and words that name data from an open set (user,
tenant, customer, coupon names). Every other word is part of the kind,
including those taken from a fixed set that the code or the platform names:
the exception, the operation or handler, the HTTP method, an error code or
reason word, a state, a consistency level, the upstream service or carrier.
So "Post ...: context deadline exceeded" and "Get ...: context deadline
exceeded" are two kinds, "customer alice ..." and "customer bob ..." one.
A kind's label is its template id followed by the fixed-set words it took.

The value pools are sized as in a real DLQ: open sets are large (dozens of
names), fixed sets as small as the platform makes them.
"""
import random
import string

R = random.Random(20261219)


def num(a=1, b=99999): return str(R.randint(a, b))
def hexs(n=12): return ''.join(R.choice('0123456789abcdef') for _ in range(n))
def uuid(): return '-'.join(hexs(n) for n in (8, 4, 4, 4, 12))
def ip(): return '10.%d.%d.%d' % (R.randint(0, 255), R.randint(0, 255), R.randint(1, 254))
def pick(xs): return R.choice(xs)


FIRST = ('alice bob carol dave erin frank grace heidi ivan judy mallory niaj olivia peggy rupert sybil trent '
         'victor walter xavier yolanda zoe amir bea chen dmitri elif farah goran hana ines jonas kemal lena '
         'marco nadia oskar priya quinn rosa sven tariq ulla').split()
TENANTS = ('acme globex initech umbrella hooli vandelay stark wayne wonka tyrell cyberdyne soylent oscorp '
           'massive dunder aperture gringotts monarch duff krusty virtucon nakatomi prestige sterling').split()
COUPONS = ('WELCOME SPRING SUMMER AUTUMN WINTER BLACKFRIDAY CYBERMONDAY FREESHIP VIPONLY LOYALTY NEWYEAR '
           'FLASH STUDENT HOLIDAY BUNDLE REFERRAL').split()
SERVICES = ['payments', 'inventory', 'ledger', 'shipping', 'pricing']
TABLES = ['orders', 'payments', 'customers', 'invoices', 'shipments', 'order_items', 'refunds']


def host(): return pick(['payments-api', 'ledger-db', 'orders-db', 'redis-cache', 'kafka', 'search', 'pricing']) + '-' + num(0, 9) + '.' + pick(['prod', 'eu-west-1', 'us-east-2']) + '.internal'
def svc_host(): return pick(['payments-api', 'ledger', 'inventory', 'pricing']) + '.' + pick(['prod', 'default', 'shop']) + '.svc.cluster.local'
def port(): return pick(['443', '5432', '6379', '9092', '8080', '3306', '27017'])
def url(): return pick(['https://api.psp.example', 'https://hooks.partner.io', 'http://pricing.shop.svc:8080', 'https://carrier.example.net']) + '/' + pick(['v1', 'v2', 'api']) + '/' + pick(['charges', 'tokens', 'labels', 'quotes', 'refunds']) + '/' + pick([hexs(10), num(), 'ch_' + hexs(14)])
def path(): return '/' + '/'.join(pick(['var', 'lib', 'data', 'srv', 'app', 'tmp', 'exports', 'invoices']) for _ in range(R.randint(2, 4))) + '/' + pick(['inv', 'batch', 'export']) + '-' + num() + pick(['.pdf', '.csv', '.json'])
def dur(): return pick([num(1, 999) + 'ms', num(1, 59) + 's', num(1, 9) + '.' + num(0, 999) + 's'])
def ts(): return '2026-%02d-%02dT%02d:%02d:%02dZ' % (R.randint(1, 12), R.randint(1, 28), R.randint(0, 23), R.randint(0, 59), R.randint(0, 59))
def order(): return pick(['ord_', 'ORD-', 'order-']) + pick([num(10000, 999999), hexs(10)])
def sku(): return 'SKU-' + num(10000, 99999)
def email(): return pick(FIRST) + pick(['', '.' + pick(FIRST)]) + '@' + pick(['example.com', 'mail.org', 'corp.net'])
def money(): return '%d.%02d' % (R.randint(1, 5000), R.randint(0, 99))
def req_id(): return ''.join(R.choice(string.ascii_uppercase + string.digits) for _ in range(16))


# Each entry: (id, weight, function returning (label suffix words, message)).
# The suffix words are the fixed-set words of the kind, joined into the label.
T = []


def t(tid, weight):
    def deco(f):
        T.append((tid, weight, f))
        return f
    return deco


# ---- Java: HTTP clients, Spring, Jackson, JDBC, Kafka, gRPC, AWS SDK
@t('J1', 40)
def _():
    kind = pick(['Read', 'connect'])
    return [kind], f'java.net.SocketTimeoutException: {kind} timed out'

@t('J2', 12)
def _():
    return [], f'java.net.ConnectException: Connection refused: {host()}/{ip()}:{port()}'

@t('J3', 25)
def _():
    code, name, reason = pick([('503', 'ServiceUnavailable', 'Service Unavailable'), ('502', 'BadGateway', 'Bad Gateway'), ('500', 'InternalServerError', 'Internal Server Error')])
    body = pick(['"[no body]"', '"{"error":"upstream_timeout","request_id":"' + req_id() + '"}"'])
    return [name], f'org.springframework.web.client.HttpServerErrorException${name}: {code} {reason}: {body}'

@t('J4', 6)
def _():
    return [], f'org.springframework.web.client.HttpClientErrorException$NotFound: 404 Not Found: "{{"error":"order {order()} not found"}}"'

@t('J5', 12)
def _():
    m, cls = pick([('onOrderCreated', 'OrderCreated'), ('onPaymentCaptured', 'PaymentCaptured')])
    var = pick(['customer', 'address', 'lineItem'])
    return [], (f"org.springframework.kafka.listener.ListenerExecutionFailedException: Listener method 'public void com.acme.orders.OrderListener.{m}(com.acme.events.{cls})' "
                 f'threw exception; nested exception is java.lang.NullPointerException: Cannot invoke "com.acme.orders.{var.capitalize()}.getId()" because "{var}" is null')

@t('J6', 6)
def _():
    return [], (f'com.fasterxml.jackson.databind.exc.MismatchedInputException: Cannot deserialize value of type `java.time.Instant` from String "{pick(["2026-13-01", "yesterday", "", "01/02/2026"])}": '
                f'Failed to deserialize java.time.Instant at [Source: (byte[])"{{"orderId":"{order()}","placedAt":"..."}}"; line: 1, column: {num(20, 300)}]')

@t('J7', 3)
def _():
    field = pick(['couponCode', 'giftWrap', 'loyaltyId', 'channel'])
    return [], f'com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException: Unrecognized field "{field}" (class com.acme.orders.OrderDto), not marked as ignorable ({num(8, 20)} known properties: "id", "items", "total", "currency"])'

@t('J8', 6)
def _():
    c = f'uk_{pick(TABLES)}_external_id'
    return [c], f'org.hibernate.exception.ConstraintViolationException: could not execute statement; SQL [n/a]; constraint [{c}]'

@t('J9', 3)
def _():
    return [], f'java.lang.NumberFormatException: For input string: "{pick(["12,50", "N/A", "", "1e3", "≈40"])}"'

@t('J10', 12)
def _():
    field = pick(['amount', 'currency', 'quantity'])
    msg = {'amount': 'must be greater than 0', 'currency': 'must match "[A-Z]{3}"', 'quantity': 'must be less than or equal to 100'}[field]
    return [field], f'jakarta.validation.ConstraintViolationException: createOrder.request.{field}: {msg}'

@t('J11', 25)
def _():
    code = pick(['UNAVAILABLE', 'DEADLINE_EXCEEDED'])
    tail = {'UNAVAILABLE': 'io exception', 'DEADLINE_EXCEEDED': f'deadline exceeded after {num(1, 9)}.{num(100000000, 999999999)}s. [closed=[], open=[[buffered_nanos={num(1000, 99999999)}, remote_addr={svc_host()}/{ip()}:{port()}]]]'}[code]
    return [code], f'io.grpc.StatusRuntimeException: {code}: {tail}'

@t('J12', 3)
def _():
    size = R.randint(1048577, 9000000)
    return [], f'org.apache.kafka.common.errors.RecordTooLargeException: The message is {size} bytes when serialized which is larger than 1048576, which is the value of the max.request.size configuration.'

@t('J13', 12)
def _():
    return [], f'org.postgresql.util.PSQLException: ERROR: duplicate key value violates unique constraint "{pick(TABLES)}_pkey"   Detail: Key (id)=({num()}) already exists.'

@t('J14', 40)
def _():
    return [], f'java.sql.SQLTransientConnectionException: HikariPool-{num(1, 3)} - Connection is not available, request timed out after {pick(["30000", "30001", "30004", "10000"])}ms.'

@t('J15', 6)
def _():
    return [], f"java.util.concurrent.TimeoutException: Did not observe any item or terminal signal within {num(1000, 30000)}ms in 'flatMap' (and no fallback has been configured)"

@t('J16', 3)
def _():
    return [], f'software.amazon.awssdk.services.s3.model.NoSuchKeyException: The specified key does not exist. (Service: S3, Status Code: 404, Request ID: {req_id()}, Extended Request ID: {hexs(40)})'

@t('J17', 6)
def _():
    return [], f'redis.clients.jedis.exceptions.JedisConnectionException: Failed to connect to any host resolved for DNS name.'

@t('J18', 3)
def _():
    return [], f'java.lang.IllegalStateException: Order {order()} has no payment method'

# ---- Go: net/http, pgx, go-redis, grpc, sarama, encoding/json
@t('G1', 40)
def _():
    m = pick(['Post', 'Get'])
    return [m], f'{m} "{url()}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'

@t('G2', 12)
def _():
    m = pick(['Post', 'Get'])
    return [m], f'{m} "{url()}": dial tcp {ip()}:{port()}: i/o timeout'

@t('G3', 12)
def _():
    return [], f'dial tcp: lookup {svc_host()} on 10.96.0.10:53: no such host'

@t('G4', 25)
def _():
    return [], f'read tcp {ip()}:{num(30000, 65000)}->{ip()}:{port()}: read: connection reset by peer'

@t('G5', 12)
def _():
    return [], f'ERROR: duplicate key value violates unique constraint "{pick(TABLES)}_{pick(["pkey", "external_id_key", "idempotency_key_key"])}" (SQLSTATE 23505)'

@t('G6', 6)
def _():
    return [], f'failed to connect to `host={host()} user={pick(["app", "orders", "ledger"])} database={pick(["shop", "ledger"])}`: dial error (dial tcp {ip()}:5432: connect: connection refused)'

@t('G7', 12)
def _():
    return [], f'dial tcp {ip()}:{port()}: connect: connection refused'

@t('G8', 6)
def _():
    return [], f'redis: connection pool timeout'

@t('G9', 3)
def _():
    return [], f'READONLY You can\'t write against a read only replica.'

@t('G10', 12)
def _():
    code, desc = pick([('Unavailable', 'connection error: desc = "transport: Error while dialing: dial tcp ' + ip() + ':' + port() + ': connect: connection refused"'),
                       ('DeadlineExceeded', 'context deadline exceeded'),
                       ('ResourceExhausted', 'grpc: received message larger than max (' + num(4194305, 9999999) + ' vs. 4194304)')])
    return [code], f'rpc error: code = {code} desc = {desc}'

@t('G11', 6)
def _():
    typ, field, want = pick([('string', 'Order.amount', 'int64'), ('number', 'Order.items.sku', 'string'), ('array', 'Customer.address', 'main.Address')])
    return [typ, field, want], f'json: cannot unmarshal {typ} into Go struct field {field} of type {want}'

@t('G12', 3)
def _():
    topic = pick(["orders", "payments", "shipments"])
    return [topic], f'kafka: Failed to produce message to topic {topic}: kafka server: Message was too large, server rejected it to avoid allocation error'

@t('G13', 6)
def _():
    return [], f'handle order {order()}: charge: psp returned status {pick(["500", "502", "504"])} after {dur()}'

@t('G14', 3)
def _():
    return [], f'open {path()}: no such file or directory'

# ---- Python: requests, psycopg2, SQLAlchemy, botocore, redis-py, Django, pydantic
@t('P1', 25)
def _():
    return [], f"requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='{pick(['api.psp.example', 'hooks.partner.io', 'carrier.example.net'])}', port=443): Read timed out. (read timeout={pick(['5', '10', '30'])})"

@t('P2', 12)
def _():
    code, reason = pick([('502', 'Bad Gateway'), ('503', 'Service Unavailable')])
    return [reason], f'requests.exceptions.HTTPError: {code} Server Error: {reason} for url: {url()}'

@t('P3', 6)
def _():
    return [], (f"requests.exceptions.ConnectionError: HTTPSConnectionPool(host='{host()}', port={port()}): Max retries exceeded with url: /v1/charges/{hexs(10)} "
                f"(Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x{hexs(12)}>: Failed to establish a new connection: [Errno 111] Connection refused'))")

@t('P4', 12)
def _():
    t_ = pick(TABLES)
    return [], f'psycopg2.errors.UniqueViolation: duplicate key value violates unique constraint "{t_}_pkey" DETAIL:  Key (id)=({num()}) already exists.'

@t('P5', 6)
def _():
    return [], (f'psycopg2.OperationalError: could not connect to server: Connection refused Is the server running on host "{host()}" ({ip()}) '
                f'and accepting TCP/IP connections on port 5432?')

@t('P6', 6)
def _():
    return [], (f'sqlalchemy.exc.IntegrityError: (psycopg2.errors.ForeignKeyViolation) insert or update on table "order_items" violates foreign key constraint "order_items_order_id_fkey" '
                f'DETAIL:  Key (order_id)=({num()}) is not present in table "orders".')

@t('P7', 25)
def _():
    code, op, msg = pick([('ThrottlingException', 'PutItem', 'Rate exceeded'), ('ProvisionedThroughputExceededException', 'UpdateItem',
                          'The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.'),
                          ('ConditionalCheckFailedException', 'PutItem', 'The conditional request failed')])
    return [code, op], f'botocore.exceptions.ClientError: An error occurred ({code}) when calling the {op} operation (reached max retries: {num(1, 9)}): {msg}'

@t('P8', 6)
def _():
    return [], f'redis.exceptions.ConnectionError: Error 111 connecting to {host()}:6379. Connection refused.'

@t('P9', 6)
def _():
    return [], f"django.db.utils.OperationalError: (1213, 'Deadlock found when trying to get lock; try restarting transaction')"

@t('P10', 12)
def _():
    field = pick(['amount', 'currency', 'customer_id'])
    return [field], f'pydantic_core._pydantic_core.ValidationError: 1 validation error for OrderCreated {field} Field required [type=missing, input_value={{\'id\': \'{order()}\'}}, input_type=dict]'

@t('P11', 3)
def _():
    return [], f"ValueError: invalid literal for int() with base 10: '{pick(['abc', '', '12.5', 'N/A', 'ten'])}'"

@t('P12', 6)
def _():
    return [], f'json.decoder.JSONDecodeError: Expecting value: line 1 column {num(1, 300)} (char {num(0, 299)})'

@t('P13', 3)
def _():
    return [], f"KeyError: '{pick(['customer_id', 'amount', 'currency', 'items', 'sku'])}'"

@t('P14', 6)
def _():
    return [], f'celery.exceptions.SoftTimeLimitExceeded: SoftTimeLimitExceeded()'

# ---- Node: axios, node-fetch, pg, mongodb
@t('N1', 12)
def _():
    return [], f'Error: connect ECONNREFUSED {ip()}:{port()}'

@t('N2', 25)
def _():
    return [], f'AxiosError: Request failed with status code {pick(["500", "502", "503", "504"])}'

@t('N3', 6)
def _():
    return [], f'FetchError: request to {url()} failed, reason: getaddrinfo ENOTFOUND {pick(["api.psp.example", "hooks.partner.io"])}'

@t('N4', 6)
def _():
    return [], f"TypeError: Cannot read properties of undefined (reading '{pick(['id', 'total', 'customer', 'length'])}')"

@t('N5', 6)
def _():
    coll = pick(["orders", "carts"])
    return [coll], f'MongoServerError: E11000 duplicate key error collection: shop.{coll} index: {pick(["orderId_1", "externalId_1"])} dup key: {{ orderId: "{order()}" }}'

@t('N6', 3)
def _():
    return [], f'Error: timeout of {pick(["5000", "10000"])}ms exceeded'

# ---- .NET
@t('D1', 6)
def _():
    return [], (f'Microsoft.Data.SqlClient.SqlException (0x80131904): Transaction (Process ID {num(50, 400)}) was deadlocked on lock resources with another process '
                f'and has been chosen as the deadlock victim. Rerun the transaction.')

@t('D2', 3)
def _():
    return [], 'System.TimeoutException: The operation has timed out.'

@t('D3', 6)
def _():
    code, reason = pick([('500', 'Internal Server Error'), ('503', 'Service Unavailable')])
    return [reason], f'System.Net.Http.HttpRequestException: Response status code does not indicate success: {code} ({reason}).'

# ---- Databases and stores, as their servers word it
@t('B1', 6)
def _():
    return [], f"Error 1062 (23000): Duplicate entry '{pick([order(), email(), sku()])}' for key '{pick(['orders.uk_external_id', 'customers.uk_email'])}'"

@t('B2', 6)
def _():
    return [], 'Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction'

@t('B3', 6)
def _():
    level = pick(['LOCAL_QUORUM', 'QUORUM'])
    return [level], f'Cassandra timeout during write query at consistency {level} ({num(2, 3)} replica were required but only {num(0, 1)} acknowledged the write)'

@t('B4', 3)
def _():
    return [], (f'es_rejected_execution_exception: rejected execution of coordinating operation [coordinating_and_primary_bytes={num(10**8, 10**9)}, replica_bytes=0, '
                f'all_bytes={num(10**8, 10**9)}, coordinating_operation_bytes={num(1000, 99999)}, max_coordinating_and_primary_bytes={num(10**8, 10**9)}]')

@t('B5', 3)
def _():
    return [], "OOM command not allowed when used memory > 'maxmemory'."

@t('B6', 6)
def _():
    return [], f'ERROR: could not serialize access due to concurrent update (SQLSTATE 40001)'

# ---- Brokers
@t('Q1', 6)
def _():
    return [], f'message {uuid()} exceeded max delivery count {num(3, 10)}'

@t('Q2', 3)
def _():
    return [], f'nats: timeout'

@t('Q3', 3)
def _():
    return [], f'Commit cannot be completed since the group has already rebalanced and assigned the partitions to another member.'

# ---- Business rules, as services word them
@t('R1', 25)
def _():
    state = pick(['SHIPPED', 'CANCELLED', 'REFUNDED'])
    return [state], f'order {order()} cannot be captured in state {state}'

@t('R2', 12)
def _():
    return [], f'customer {pick(FIRST)} exceeded the daily limit of {money()} EUR'

@t('R3', 12)
def _():
    return [], f'tenant {pick(TENANTS)} is suspended'

@t('R4', 6)
def _():
    return [], f'coupon {pick(COUPONS)} expired at {ts()}'

@t('R5', 25)
def _():
    reason = pick(['insufficient_funds', 'do_not_honor', 'expired_card', 'card_velocity_exceeded'])
    return [reason], f'payment declined: {reason}'

@t('R6', 6)
def _():
    carrier = pick(['dhl', 'ups'])
    return [carrier], f'carrier {carrier} rejected the label for shipment {num()}: address incomplete'

@t('R7', 12)
def _():
    s = pick(SERVICES[:3])
    return [s], f'upstream {s} returned an empty body'

@t('R8', 3)
def _():
    return [], f'sku {sku()} is out of stock'

@t('R9', 3)
def _():
    return [], f'user {email()} is not allowed to approve refunds above {money()}'

@t('R10', 6)
def _():
    return [], f'duplicate event {uuid()}: already processed at {ts()}'

@t('R11', 3)
def _():
    return [], 'refund amount exceeds captured amount'

@t('R12', 3)
def _():
    return [], 'schema validation failed: payload is not valid against orders.v3'


lines = []
for tid, weight, f in T:
    for _ in range(weight * 2):
        words, msg = f()
        label = ':'.join([tid] + words)
        lines.append((label, msg.replace('\t', ' ').replace('\n', ' ')))
R.shuffle(lines)
print('# Dead-letter errors of Java, Go, Python, Node and .NET services with their true kinds: generate_dlq.py wrote them; see it for how the kinds were written.')
for k, m in lines:
    print(f'{k}\t{m}')
