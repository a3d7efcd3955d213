"""Generate ``long_multithread.jsonl``: six long, interleaved working sessions.

Run ``python make_long.py``; the JSONL file is written next to this script.
Standard library only; the single source of randomness is ``random.Random(20261130)``,
so the output is byte-identical on every run.

Layout of the generated file
----------------------------
* 6 threads: ``trip``, ``debug``, ``schema`` (English) and ``langgraph``, ``flask``,
  ``interview`` (Chinese), 213 turns in total, interleaved in a shuffled but fixed order.
* Facts: turns 1, 4, 7, ..., 22 of each thread carry one marked fact each, written as
  ``FACT-<thread_id>-<n>`` (n = 1..8) inside the human message only. The token never appears
  again later, so a checker can grep a summary / memory view for ``FACT-[a-z]+-[0-9]+`` and
  see which early facts survived.
* Tool turns (about 1 in 14): human -> ai with ``tool_calls`` -> tool (``tool_call_id``) -> final ai.
* Length bands (asserted below): human 15-60 words (English) / 30-120 characters (Chinese);
  final AI answers 30-120 words / 60-240 characters. The short AI line that only announces a
  tool call is exempt.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

SEED = 20261130
OUT = Path(__file__).resolve().parent / "long_multithread.jsonl"
FACT_EVERY = 3  # one fact every 3 turns: turns 1, 4, 7, ...

# ---------------------------------------------------------------------------
# Thread content
# ---------------------------------------------------------------------------
# Each thread: id, language, number of turns, context phrase, facts (human text, AI paraphrase),
# topics in session order (topic, topic-specific detail), tool scenarios.

THREADS = [
    {
        "id": "trip",
        "lang": "en",
        "turns": 36,
        "ctx": "for our two-week Portugal trip",
        "facts": [
            ("my budget is 3000 EUR for everything except flights", "a 3000 EUR budget excluding flights"),
            ("we land in Lisbon on 12 May and fly home from Faro on 26 May", "arrival in Lisbon on 12 May and departure from Faro on 26 May"),
            ("my partner Ana is vegetarian", "Ana eats vegetarian"),
            ("neither of us drives, so no rental car", "no rental car, public transport only"),
            ("our flight lands at 22:40, quite late", "the late 22:40 arrival"),
            ("I get seasick easily, so no boat tours please", "no boat tours because of seasickness"),
            ("Ana's birthday is on 19 May and I want to surprise her", "Ana's birthday on 19 May"),
            ("we prefer guesthouses, at most 120 EUR per night", "guesthouses capped at 120 EUR a night"),
        ],
        "topics": [
            ("getting from the airport to the city centre", "The metro red line runs from the airport into town, and a taxi or ride-hail is the simpler option late at night."),
            ("choosing a neighbourhood to stay in Lisbon", "Baixa and Chiado are central and flat-ish, while Alfama is charming but hilly and louder at night."),
            ("a first-day walking route through Alfama", "Start at the castle early, walk down to the miradouros, and end near the river before the afternoon heat."),
            ("the day trip to Sintra", "Trains leave from Rossio station and take about forty minutes; go early on a weekday to avoid the crowds."),
            ("train tickets from Lisbon to Porto", "The Alfa Pendular takes roughly three hours and is cheaper when booked a few weeks ahead."),
            ("exploring the Ribeira district in Porto", "Ribeira is best in the late afternoon; cross the upper deck of the Dom Luis I bridge for the view."),
            ("visiting the Douro valley without a car", "A regional train from Porto Sao Bento to Pinhao follows the river and takes around two and a half hours."),
            ("the queue at Livraria Lello", "Tickets are bought online for a time slot, and the first slot of the day is the quietest."),
            ("getting from Porto down to the Algarve", "There is no direct fast route; most people take the train to Lisbon and change for the south coast."),
            ("beaches around Lagos", "Praia Dona Ana and Camilo are walkable from town, and the cliff path between them is worth an hour."),
            ("packing for the weather in May", "May is mild but evenings can be cool and windy on the coast, so layers beat heavy jackets."),
            ("travel insurance", "A basic policy should cover medical costs and cancellations; check whether it covers lost baggage too."),
            ("mobile data and eSIM options", "An EU roaming plan or a local eSIM with ten to twenty gigabytes is plenty for maps and tickets."),
            ("museum passes like the Lisboa Card", "The Lisboa Card bundles public transport with entry to several museums, so it pays off on busy days."),
            ("finding good vegetarian restaurants", "Lisbon and Porto both have many vegetarian places now, and traditional menus usually have a few options."),
            ("planning a special dinner reservation", "Popular restaurants book out a week or two ahead, so reserve early and mention the occasion."),
            ("tracking daily spending", "A simple shared note with a daily target keeps the total visible without turning the trip into accounting."),
            ("backup plans for rainy days", "Keep a short list of indoor options per city, such as the tile museum in Lisbon or the Serralves museum in Porto."),
            ("tipping customs in Portugal", "Tipping is modest: rounding up or leaving about five to ten percent in restaurants is normal."),
            ("the last day and the trip to the airport", "Leave a buffer of at least two and a half hours and keep the last day light."),
        ],
        "tools": [
            {
                "name": "get_weather",
                "ask": "Before I book the Sintra day at step {i}, can you check the weather forecast for Sintra on 14 May? If it looks wet I would rather move the day trip.",
                "args": {"city": "Sintra", "date": "2027-05-14"},
                "result": lambda r: {"city": "Sintra", "date": "2027-05-14", "high_c": r.randint(18, 24), "low_c": r.randint(11, 14), "rain_chance_pct": r.randint(10, 80)},
                "final": lambda v: (
                    f"The forecast for Sintra on 14 May shows a high of {v['high_c']} degrees and a low of {v['low_c']}, "
                    f"with a {v['rain_chance_pct']} percent chance of rain. "
                    + ("That is fairly wet, so I would swap Sintra with the museum day in Lisbon and keep the train tickets flexible."
                       if v["rain_chance_pct"] >= 50 else
                       "That looks fine, so the day trip can stay as planned; just bring a light layer for the hills around the palaces.")
                ),
            },
            {
                "name": "search_trains",
                "ask": "Step {i}: can you look up morning trains from Lisbon to Porto on 17 May and tell me the cheapest reasonable option?",
                "args": {"from": "Lisboa Santa Apolonia", "to": "Porto Campanha", "date": "2027-05-17"},
                "result": lambda r: {"options": [
                    {"dep": "08:39", "arr": "11:35", "type": "Alfa Pendular", "price_eur": r.randint(28, 45)},
                    {"dep": "09:09", "arr": "12:25", "type": "Intercidades", "price_eur": r.randint(20, 27)},
                ]},
                "final": lambda v: (
                    f"There are two sensible morning options. The Alfa Pendular leaves at 08:39 and arrives at 11:35 for "
                    f"{v['options'][0]['price_eur']} EUR per person, and the Intercidades leaves at 09:09 and arrives at 12:25 for "
                    f"{v['options'][1]['price_eur']} EUR. The slower train saves a little money and still gets you to Porto for lunch, "
                    "so I would book that one unless you want the extra hour."
                ),
            },
            {
                "name": "get_weather",
                "ask": "Can you check the forecast for Lagos on 22 May for me? I want to know at step {i} whether a full beach day makes sense.",
                "args": {"city": "Lagos", "date": "2027-05-22"},
                "result": lambda r: {"city": "Lagos", "date": "2027-05-22", "high_c": r.randint(22, 27), "low_c": r.randint(14, 17), "rain_chance_pct": r.randint(0, 30), "wind_kmh": r.randint(10, 35)},
                "final": lambda v: (
                    f"Lagos on 22 May looks good: a high of {v['high_c']} degrees, a low of {v['low_c']}, only a {v['rain_chance_pct']} "
                    f"percent chance of rain and wind around {v['wind_kmh']} kilometres per hour. A full beach day makes sense; "
                    "pick a sheltered cove if the wind picks up in the afternoon and bring sun protection."
                ),
            },
        ],
    },
    {
        "id": "debug",
        "lang": "en",
        "turns": 35,
        "ctx": "for the orders-api 502 incident",
        "facts": [
            ("the service is orders-api, running 6 replicas on Kubernetes 1.29", "orders-api with 6 replicas on Kubernetes 1.29"),
            ("the 502s started right after we deployed v2.14.0 on Tuesday", "the 502s beginning with the v2.14.0 deploy on Tuesday"),
            ("the error rate is about 0.8 percent, mostly on POST /checkout", "the 0.8 percent error rate concentrated on POST /checkout"),
            ("we run PgBouncer in transaction mode with a pool size of 40", "PgBouncer in transaction mode with a pool of 40"),
            ("the ingress upstream keepalive timeout is 60 seconds", "the 60 second upstream keepalive on the ingress"),
            ("the app runs gunicorn with uvicorn workers and keepalive set to 5 seconds", "gunicorn with uvicorn workers and a 5 second keepalive"),
            ("we cannot restart production between 09:00 and 18:00 CET", "the no-restart window from 09:00 to 18:00 CET"),
            ("the incident ticket is INC-4471 and updates go to #orders-oncall", "ticket INC-4471 with updates in #orders-oncall"),
        ],
        "topics": [
            ("reproducing the 502 outside production", "Replay a slice of real traffic against staging with the same ingress settings, otherwise the timing bug may never appear."),
            ("reading the ingress controller logs", "Look for the upstream error text next to each 502, because it tells you whether the backend closed or timed out."),
            ("correlating 502 timestamps with pod restarts", "If errors do not line up with restarts or deploys, a connection-level problem becomes much more likely."),
            ("readiness and liveness probes", "A liveness probe that is too aggressive can kill busy pods, so compare probe failures with the error spikes."),
            ("the diff of the release", "Scan the release diff for changes to server settings, dependencies and the checkout handler first."),
            ("connection reuse between the ingress and the app", "Reused idle connections are a classic source of sporadic 502s when one side closes them earlier than the other."),
            ("keepalive timeouts on both sides", "The upstream side should close idle connections before the application does, never the other way round."),
            ("PgBouncer pool saturation", "Check waiting clients in PgBouncer; if they queue, requests stall but usually show as timeouts rather than 502s."),
            ("slow queries on the checkout path", "Enable slow query logging with a low threshold for an hour and sort by total time, not by the single slowest call."),
            ("adding request IDs to the logs", "Propagate one request ID from the ingress into the app logs so a single failing request can be followed end to end."),
            ("a load test to trigger the bug", "A steady load with pauses longer than the app keepalive is what reproduces idle connection resets."),
            ("graceful shutdown and preStop hooks", "A short preStop sleep lets the ingress stop routing to a pod before gunicorn begins shutting down."),
            ("whether to roll back the release", "Rolling back is cheap if the schema did not change, and it quickly confirms or rules out the release as the cause."),
            ("a canary configuration for the fix", "Ship the fix to one replica first and compare its 502 ratio with the others for a few hours."),
            ("alerting on the 5xx ratio", "Alert on the ratio of 5xx to total requests over ten minutes instead of on raw counts."),
            ("a dashboard for upstream errors", "One panel per upstream error type makes it obvious when a fix removes one class of failure."),
            ("verifying the fix in staging", "Run the same load pattern that reproduced the bug and require zero 502s over a long enough window."),
            ("the production rollout plan", "Roll out replica by replica outside peak hours and keep the previous image ready for a fast rollback."),
            ("writing the postmortem", "Keep the postmortem blameless, with a timeline, the root cause, what detection missed and concrete follow-ups."),
            ("follow-up action items", "Each action item needs an owner and a date, otherwise it quietly disappears after the incident."),
        ],
        "tools": [
            {
                "name": "query_logs",
                "ask": "Can you search the ingress logs from the last 24 hours for 502s on orders-api? I want a count and the most common upstream error for step {i}.",
                "args": {"service": "ingress-nginx", "query": "status:502 AND upstream:orders-api", "window": "24h"},
                "result": lambda r: {"matches": r.randint(900, 2400), "top_message": "upstream prematurely closed connection while reading response header from upstream", "top_message_share_pct": r.randint(85, 97), "checkout_share_pct": r.randint(60, 80)},
                "final": lambda v: (
                    f"The ingress logged {v['matches']} 502s for orders-api in the last 24 hours. "
                    f"About {v['top_message_share_pct']} percent say the upstream prematurely closed the connection while the "
                    f"response header was being read, and {v['checkout_share_pct']} percent hit the checkout route. That pattern "
                    "points at idle keepalive connections being closed by the app while the ingress still reuses them."
                ),
            },
            {
                "name": "get_metrics",
                "ask": "Please pull the PgBouncer waiting-clients metric for the last six hours, just to rule the database pool in or out at step {i}.",
                "args": {"metric": "pgbouncer_pools_cl_waiting", "service": "pgbouncer", "window": "6h"},
                "result": lambda r: {"max": r.randint(0, 3), "p95": 0, "samples": 360},
                "final": lambda v: (
                    f"PgBouncer had at most {v['max']} waiting clients over the last six hours, with a p95 of {v['p95']} across "
                    f"{v['samples']} samples. The pool is not saturated, so the database side is very unlikely to explain the 502s. "
                    "I would focus on the keepalive mismatch between the ingress and gunicorn instead."
                ),
            },
            {
                "name": "query_logs",
                "ask": "Step {i}: after the canary change, can you count 502s on the canary replica versus the others over the last three hours?",
                "args": {"service": "ingress-nginx", "query": "status:502 AND upstream:orders-api GROUP BY pod", "window": "3h"},
                "result": lambda r: {"canary_502": 0, "other_replicas_502_avg": r.randint(25, 70)},
                "final": lambda v: (
                    f"Over the last three hours the canary replica returned {v['canary_502']} 502s, while the other replicas averaged "
                    f"{v['other_replicas_502_avg']} each. That is a strong signal that raising the app keepalive above the ingress "
                    "timeout fixed it. I would keep the canary running a bit longer and then roll out during the allowed window."
                ),
            },
        ],
    },
    {
        "id": "schema",
        "lang": "en",
        "turns": 34,
        "ctx": "for the coworking booking database",
        "facts": [
            ("the database is PostgreSQL 16", "PostgreSQL 16 as the database"),
            ("we expect about 40 locations and 15,000 members in the first year", "roughly 40 locations and 15,000 members in year one"),
            ("bookings use 30-minute slots and a desk can never be double booked", "30-minute slots with no double booking"),
            ("all timestamps are stored in UTC because locations span three time zones", "UTC storage across three time zones"),
            ("a member can belong to at most one company account", "at most one company per member"),
            ("invoices must be kept for 10 years for tax reasons", "ten-year invoice retention"),
            ("the team lead wants bigint identity primary keys, no UUIDs", "bigint identity keys instead of UUIDs"),
            ("the ORM is SQLAlchemy 2.0 and migrations run with Alembic", "SQLAlchemy 2.0 with Alembic migrations"),
        ],
        "topics": [
            ("the core entities", "Members, companies, locations, resources, bookings and invoices cover almost every query the app will run."),
            ("the members table", "Keep login identity separate from profile data so that email changes do not ripple through other tables."),
            ("companies and memberships", "A nullable company_id on members is enough when a member belongs to at most one company."),
            ("locations and rooms", "Store the IANA time zone name on each location so local opening hours can be computed correctly."),
            ("desks and other bookable resources", "One resources table with a type column avoids separate tables for desks, rooms and phone booths."),
            ("the bookings table", "A booking row needs the resource, the member, a time range and a status, plus created and cancelled timestamps."),
            ("preventing overlapping bookings", "An exclusion constraint on resource_id with equality and the time range with overlap, using btree_gist, enforces it in the database."),
            ("cancellations and soft deletes", "Keep cancelled bookings with a status instead of deleting them, and exclude them from the overlap constraint with a WHERE clause."),
            ("pricing plans", "Plans change over time, so store the price that applied on each booking rather than looking it up later."),
            ("invoices and invoice lines", "Invoice lines should copy descriptions and amounts so that old invoices never change when the catalogue does."),
            ("payments", "Record each payment attempt with the provider reference and status, since one invoice can have several attempts."),
            ("audit logging", "An append-only audit table with actor, action, entity and a JSON diff is usually enough at this size."),
            ("indexes for the availability query", "The exclusion constraint index already helps; add a composite index for member history lookups."),
            ("time zone handling per location", "Convert to local time only at the edges, in the API or the UI, and keep every stored value in UTC."),
            ("partitioning the bookings table", "At this volume partitioning is premature; revisit it only when bookings reach tens of millions of rows."),
            ("on-delete behaviour of foreign keys", "Prefer RESTRICT for business data and only use CASCADE for pure child rows like invoice lines."),
            ("enum types versus lookup tables", "Lookup tables or check constraints are easier to evolve than PostgreSQL enum types."),
            ("seed data for tests", "A small deterministic fixture with two locations and a handful of members keeps tests fast and readable."),
            ("the first Alembic migration", "Create extensions, tables and constraints in one reviewed migration, and never rely on autogenerate blindly."),
            ("a final review of the whole schema", "Walk through the top ten queries against the schema and check that each one has a clear access path."),
        ],
        "tools": [
            {
                "name": "run_sql",
                "ask": "Can you run EXPLAIN ANALYZE on the availability query for desk 42 tomorrow morning in the dev database? I want to see the plan at step {i}.",
                "args": {"db": "dev", "sql": "EXPLAIN ANALYZE SELECT 1 FROM bookings WHERE resource_id = 42 AND slot && tstzrange('2027-01-12 08:00+00', '2027-01-12 12:00+00') AND status <> 'cancelled';"},
                "result": lambda r: {"plan": "Index Scan using bookings_no_overlap on bookings", "rows": r.randint(0, 6), "execution_ms": round(r.uniform(0.05, 0.9), 3)},
                "final": lambda v: (
                    f"The planner uses an index scan on bookings_no_overlap, the GiST index behind the exclusion constraint, and "
                    f"finds {v['rows']} matching rows in {v['execution_ms']} milliseconds. So the constraint index doubles as the "
                    "access path for availability checks, and we do not need an extra index for this query yet."
                ),
            },
            {
                "name": "run_sql",
                "ask": "Please count the rows in the bookings table of the dev database after the seed script ran, so we can sanity-check the fixture at step {i}.",
                "args": {"db": "dev", "sql": "SELECT count(*) FROM bookings;"},
                "result": lambda r: {"rows": [[r.randint(180, 260)]]},
                "final": lambda v: (
                    f"The dev bookings table has {v['rows'][0][0]} rows after seeding. That is a sensible size for tests: big "
                    "enough to exercise overlaps and cancellations, small enough that every test run stays fast. I would keep "
                    "it deterministic so that assertions on counts stay stable."
                ),
            },
            {
                "name": "run_sql",
                "ask": "Step {i}: how large is the bookings table with its indexes in the load-test database right now?",
                "args": {"db": "loadtest", "sql": "SELECT pg_size_pretty(pg_total_relation_size('bookings'));"},
                "result": lambda r: {"rows": [[f"{r.randint(140, 420)} MB"]]},
                "final": lambda v: (
                    f"In the load-test database the bookings table takes {v['rows'][0][0]} including indexes. That is small for "
                    "PostgreSQL, and it confirms that partitioning would add complexity without a real benefit. Regular vacuum and "
                    "a look at index bloat once a quarter are enough."
                ),
            },
        ],
    },
    {
        "id": "langgraph",
        "lang": "zh",
        "turns": 37,
        "ctx": "学习 LangGraph",
        "facts": [
            ("我本地装的是 langgraph 1.2，Python 3.11", "langgraph 1.2 加 Python 3.11 的环境"),
            ("模型用的是本地 llama.cpp 服务，端口 8080", "本地 llama.cpp 服务（8080 端口）"),
            ("我每天只有晚上 9 点到 11 点能学习", "每晚 9 点到 11 点的学习时间"),
            ("目标是两周内做出一个带摘要记忆的客服机器人", "两周做出摘要记忆客服机器人的目标"),
            ("摘要阈值我想设为超过 6 条消息，保留最近 2 条", "超过 6 条触发、保留 2 条的摘要设置"),
            ("checkpointer 先用 SqliteSaver，数据库文件叫 chat.db", "用 SqliteSaver 和 chat.db 做持久化"),
            ("我更习惯看代码，不太喜欢长篇解释", "你偏好代码而不是长篇解释"),
            ("公司要求 thread_id 用“租户:用户:会话”的格式", "“租户:用户:会话”格式的 thread_id"),
        ],
        "topics": [
            ("StateGraph 的基本概念", "StateGraph 由 State、节点和边组成，节点读取当前状态并返回要更新的字段。"),
            ("MessagesState 和 add_messages", "messages 字段带 add_messages Reducer，返回的新消息会追加，按 id 还能替换或删除。"),
            ("给 State 增加 summary 字段", "继承 MessagesState 再加 summary: str，它没有 Reducer，是覆盖语义。"),
            ("节点函数的返回值", "节点只需返回要修改的字段组成的字典，未返回的字段保持不变。"),
            ("条件边和 should_continue", "路由函数返回下一个节点名，配合 path_map 显式映射最不容易出错。"),
            ("START 与 END", "START 是入口，END 表示本次执行结束，两者都要通过边显式连接。"),
            ("RemoveMessage 的用法", "把 RemoveMessage(id=...) 放进返回的 messages，add_messages 会按 id 删除对应消息。"),
            ("滚动摘要的提示词", "已有摘要时让模型在旧摘要基础上扩展，没有摘要时才从头总结。"),
            ("用 SystemMessage 注入摘要", "调用模型前把摘要包成 SystemMessage 放在最前面，只在本次调用里拼接，不写回状态。"),
            ("MemorySaver 和 thread_id", "compile 时传入 checkpointer，调用时用 configurable.thread_id 区分不同会话。"),
            ("用 get_state 查看状态", "graph.get_state(config).values 能看到当前 messages 和 summary，调试很方便。"),
            ("流式输出 stream_mode", "stream_mode=\"updates\" 只看每个节点的增量，\"values\" 看每一步后的完整状态。"),
            ("工具节点 ToolNode", "ToolNode 执行模型发出的 tool_calls，并把结果作为 ToolMessage 追加回 messages。"),
            ("人工介入 interrupt", "interrupt 会暂停图并保存检查点，之后用 Command(resume=...) 继续执行。"),
            ("子图的组织方式", "子图适合把摘要、检索这类可复用的流程封装起来，状态键要和父图对齐。"),
            ("节点出错时的重试", "可以给节点配置重试策略，但摘要失败时要保证原始消息不丢。"),
            ("如何给图写测试", "用假模型返回固定内容，断言每轮之后的 messages 条数和 summary 内容。"),
            ("部署和持久化选型", "开发用内存存储，生产换成 SqliteSaver 或 PostgresSaver，图的其他代码不用改。"),
            ("长期记忆 Store", "摘要只服务当前线程，用户偏好这类跨会话信息应该写进 Store。"),
            ("复盘整个学习计划", "按“概念、摘要记忆、持久化、工具、人工介入、测试”的顺序回顾最有效。"),
        ],
        "tools": [
            {
                "name": "search_docs",
                "ask": "第 {i} 步：帮我查一下官方文档里 RemoveMessage 和 add_messages 配合删除消息的说明，我想确认写法。",
                "args": {"query": "RemoveMessage add_messages delete messages", "site": "langchain-ai.github.io/langgraph"},
                "result": lambda r: {"title": "How to delete messages", "snippet": "Return RemoveMessage(id=m.id) objects in the messages key; the add_messages reducer removes the matching messages from state.", "score": round(r.uniform(0.82, 0.97), 2)},
                "final": lambda v: (
                    f"文档《{v['title']}》的说明和我们的写法一致：在节点里返回 messages=[RemoveMessage(id=m.id) ...]，"
                    "add_messages 会按 id 把对应消息从状态里删除，而不是把 RemoveMessage 追加进去。"
                    "所以摘要节点里对 state[\"messages\"][:-2] 逐条生成 RemoveMessage 就可以了。"
                ),
            },
            {
                "name": "search_docs",
                "ask": "帮我搜一下 SqliteSaver 的用法，特别是连接怎么创建、要不要手动 setup，这是第 {i} 步要用的。",
                "args": {"query": "SqliteSaver from_conn_string setup", "site": "langchain-ai.github.io/langgraph"},
                "result": lambda r: {"title": "Persistence", "snippet": "SqliteSaver.from_conn_string(path) is a context manager; pass the saver as checkpointer when compiling the graph.", "score": round(r.uniform(0.8, 0.95), 2)},
                "final": lambda v: (
                    f"查到了《{v['title']}》一节：SqliteSaver.from_conn_string(\"chat.db\") 是一个上下文管理器，"
                    "在 with 块里把它作为 checkpointer 传给 compile 即可，表会自动建好。"
                    "注意进程退出前不要提前关闭连接，否则后续调用会报连接已关闭的错误。"
                ),
            },
            {
                "name": "search_docs",
                "ask": "第 {i} 步想学人工介入，帮我查查 interrupt 和 Command(resume=...) 的官方示例。",
                "args": {"query": "interrupt Command resume human in the loop", "site": "langchain-ai.github.io/langgraph"},
                "result": lambda r: {"title": "Human-in-the-loop", "snippet": "Call interrupt(value) inside a node to pause; resume with graph.invoke(Command(resume=answer), config).", "score": round(r.uniform(0.8, 0.95), 2)},
                "final": lambda v: (
                    f"官方《{v['title']}》示例的要点：在节点里调用 interrupt(value) 暂停执行，"
                    "图会在检查点里记录暂停位置；之后用 graph.invoke(Command(resume=answer), config) 恢复，"
                    "answer 会成为 interrupt 的返回值。前提是编译时配置了 checkpointer。"
                ),
            },
        ],
    },
    {
        "id": "flask",
        "lang": "zh",
        "turns": 36,
        "ctx": "迁移老 Flask 项目",
        "facts": [
            ("项目现在跑在 Python 3.8 + Flask 1.1.4 上", "Python 3.8 加 Flask 1.1.4 的现状"),
            ("代码大约 4.5 万行，一共 212 个路由", "4.5 万行代码、212 个路由的规模"),
            ("数据库是 MySQL 8.0，这次迁移不能换数据库", "继续使用 MySQL 8.0、不换库"),
            ("测试覆盖率只有 38%", "只有 38% 的测试覆盖率"),
            ("上线截止日期是 6 月 30 日", "6 月 30 日的上线期限"),
            ("团队只有 3 个后端开发", "只有 3 个后端开发的人手"),
            ("登录用的是 Flask-Login，会话存在 Redis 里", "Flask-Login 加 Redis 会话"),
            ("目标部署平台是公司自建的 Kubernetes", "部署到公司自建 Kubernetes"),
        ],
        "topics": [
            ("梳理依赖清单", "先用 pip freeze 导出现有版本，标出每个包支持新版 Flask 的最低版本。"),
            ("把 Python 升到 3.12", "先在 CI 里并行跑新旧两个 Python 版本，修完弃用警告再切换默认版本。"),
            ("Flask 1.x 到 3.x 的破坏性变更", "before_first_request 已被移除，JSON 编码器的自定义方式也改成了 app.json 提供者。"),
            ("Werkzeug 的版本变化", "Werkzeug 升级后一些工具函数被移除，测试客户端的行为也有细微差别。"),
            ("Flask-SQLAlchemy 3 的 API 变化", "3.x 要求在应用上下文里使用 db，并推荐用 db.session.execute(select(...)) 查询。"),
            ("SQLAlchemy 2.0 的查询写法", "Query 接口成了旧式写法，新代码统一用 select() 加 session.scalars()。"),
            ("蓝图结构整理", "先按业务域拆蓝图，再统一注册，避免循环导入。"),
            ("配置管理和环境变量", "把密钥全部移到环境变量，按环境拆配置类，启动时校验必填项。"),
            ("Jinja2 模板兼容", "新版 Jinja2 移除了一些旧扩展，需要检查自定义过滤器和 autoescape 设置。"),
            ("Flask-Login 会话迁移", "会话序列化格式不变的话可以平滑切换，否则要准备一次性让用户重新登录的方案。"),
            ("Celery 异步任务", "Celery 任务里也要正确推送应用上下文，否则数据库调用会报错。"),
            ("补测试", "优先给登录、下单、支付这些核心路由补集成测试，比追求覆盖率数字更有效。"),
            ("CI 流水线", "流水线至少包含 lint、单元测试、迁移检查和镜像构建四步。"),
            ("Docker 镜像", "用多阶段构建和 slim 基础镜像，依赖层单独缓存，镜像体积能小很多。"),
            ("gunicorn 配置", "worker 数先按 CPU 核数的两倍左右设置，再根据压测调整超时和 keepalive。"),
            ("Kubernetes 部署清单", "Deployment、Service、就绪探针和资源限制要一起写，配置用 ConfigMap 和 Secret 注入。"),
            ("灰度发布", "先切 5% 流量到新版本，观察错误率和延迟，再逐步放量。"),
            ("监控与日志", "统一结构化日志，接入请求耗时和错误率指标，灰度期间重点盯这两个。"),
            ("回滚预案", "保留旧版本镜像和旧部署清单，回滚时只切流量，数据库变更必须向后兼容。"),
            ("迁移复盘", "复盘时记录踩过的坑和耗时最多的环节，给下一个老项目迁移做参考。"),
        ],
        "tools": [
            {
                "name": "run_shell",
                "ask": "第 {i} 步：帮我在仓库里统计一下还有多少处用了 before_first_request，我想估算改动量。",
                "args": {"cmd": "grep -rn \"before_first_request\" app/ | wc -l", "cwd": "/srv/legacy-app"},
                "result": lambda r: {"exit_code": 0, "stdout": str(r.randint(3, 14))},
                "final": lambda v: (
                    f"仓库里一共有 {v['stdout']} 处用到 before_first_request。这个钩子在新版 Flask 里已经移除，"
                    "建议把这些初始化逻辑挪到应用工厂 create_app 里，在返回 app 之前执行；"
                    "如果依赖应用上下文，就用 with app.app_context() 包一层。改动量不大，一个人半天能完成。"
                ),
            },
            {
                "name": "run_shell",
                "ask": "帮我在新分支上跑一遍 pytest，看看升级依赖之后现在挂了多少用例，这是第 {i} 步的检查。",
                "args": {"cmd": "pytest -q", "cwd": "/srv/legacy-app"},
                "result": lambda r: {"exit_code": 1, "stdout": f"{r.randint(380, 460)} passed, {r.randint(6, 25)} failed in {r.randint(70, 140)}s"},
                "final": lambda v: (
                    f"测试结果是：{v['stdout']}。失败的用例不多，而且大多集中在少数模块，"
                    "说明依赖升级本身问题不大。建议先按失败原因分组：查询写法变化、应用上下文缺失、测试客户端行为差异，"
                    "逐组修复，每修完一组就提交一次，方便回溯。"
                ),
            },
            {
                "name": "run_shell",
                "ask": "第 {i} 步：看一下现在还有多少依赖包是过时的，我想知道升级清单到底有多长。",
                "args": {"cmd": "pip list --outdated --format=freeze | wc -l", "cwd": "/srv/legacy-app"},
                "result": lambda r: {"exit_code": 0, "stdout": str(r.randint(18, 47))},
                "final": lambda v: (
                    f"目前有 {v['stdout']} 个依赖包有新版本。不用一次全升：先升 Flask、Werkzeug、"
                    "Flask-SQLAlchemy、SQLAlchemy 这条主链，再处理和它们有版本约束的插件，其余的工具类依赖放到迁移完成之后。"
                    "每次升级后都跑一遍完整测试。"
                ),
            },
        ],
    },
    {
        "id": "interview",
        "lang": "zh",
        "turns": 35,
        "ctx": "准备后端面试",
        "facts": [
            ("我面的是一家电商公司的高级后端工程师岗位", "电商公司高级后端工程师的岗位"),
            ("面试时间是下周四下午 2 点，一共三轮", "下周四下午 2 点、三轮面试的安排"),
            ("我的主力语言是 Go，有 6 年经验", "6 年 Go 开发经验"),
            ("我上一份工作做的是支付对账系统", "支付对账系统的项目背景"),
            ("我的算法比较弱，尤其是动态规划", "动态规划是薄弱项"),
            ("期望薪资是 45k × 15", "45k × 15 的期望薪资"),
            ("第二轮是系统设计，听说面试官喜欢问秒杀", "第二轮系统设计可能考秒杀"),
            ("我英语口语一般，但有一轮可能要用英文", "有一轮可能要用英文面试"),
        ],
        "topics": [
            ("自我介绍", "控制在两分钟以内，按“背景、代表项目、为什么想来”三段讲，结尾留一个面试官会追问的钩子。"),
            ("用 STAR 讲项目经历", "每个项目都准备情境、任务、行动、结果四部分，结果尽量用数字说话。"),
            ("支付对账系统的难点", "重点讲数据量、对账口径不一致和差错处理流程，以及你如何保证最终一致。"),
            ("Go 的并发模型", "讲清 goroutine、channel 和 GMP 调度，再举一个你处理过的并发问题。"),
            ("Go 的 GC 与内存", "三色标记加写屏障是基础，能说出如何用 pprof 定位内存问题会加分。"),
            ("MySQL 索引", "B+ 树、最左前缀、覆盖索引和回表是必考点，最好配一个慢查询优化的真实例子。"),
            ("事务隔离级别", "说明四种隔离级别和 MVCC，再讲 InnoDB 在可重复读下如何处理幻读。"),
            ("Redis 缓存一致性", "常见做法是先更新数据库再删缓存，配合延迟双删或订阅 binlog 兜底。"),
            ("消息队列的幂等", "用业务唯一键加去重表或状态机保证消费幂等，对账场景尤其重要。"),
            ("分布式锁", "Redis 锁要讲清过期时间、续期和误删问题，对强一致场景可以提 etcd。"),
            ("秒杀系统设计", "核心是流量分层拦截：前端限流、网关限流、库存预扣在 Redis、异步下单削峰。"),
            ("限流算法", "令牌桶、漏桶、滑动窗口各有适用场景，能说出你在网关里怎么落地更好。"),
            ("动态规划入门", "先练定义状态和写转移方程，从爬楼梯、零钱兑换、最长递增子序列开始。"),
            ("二叉树题目", "递归三问：返回什么、子问题是什么、如何合并，遍历和最近公共祖先是高频题。"),
            ("行为面试问题", "准备冲突处理、失败经历和推动跨团队合作三个故事，每个都要有反思。"),
            ("英文自我介绍", "准备一段一分钟的英文版本，句子短一些，关键术语提前练熟。"),
            ("反问环节", "可以问团队目前最大的技术挑战、新人前三个月的预期和技术决策方式。"),
            ("薪资谈判", "先了解对方的职级和薪资结构，再给出有依据的范围，不要第一轮就亮底牌。"),
            ("面试前一天的安排", "前一天只复习提纲，不刷新题，确认路线或会议链接，早点休息。"),
            ("模拟面试复盘", "把每次模拟中答不好的问题记下来，按出现频率排序，优先补高频的。"),
        ],
        "tools": [
            {
                "name": "search_questions",
                "ask": "第 {i} 步：帮我搜几道高级岗位常见的秒杀系统设计追问，我想提前准备。",
                "args": {"topic": "秒杀系统设计", "level": "senior", "limit": 3},
                "result": lambda r: {"questions": ["如何防止超卖？", "库存扣减放在 Redis 还是 MySQL？", "如何在大促时削峰填谷？"], "source_count": r.randint(12, 40)},
                "final": lambda v: (
                    f"从 {v['source_count']} 份面经里整理出三个高频追问：{'；'.join(v['questions'])}"
                    "建议每个问题都按“方案、取舍、兜底”三层来答，比如超卖可以讲 Redis 预扣加数据库乐观锁，再说明对账如何兜底。"
                ),
            },
            {
                "name": "search_questions",
                "ask": "帮我找三道中等难度的动态规划题，这是第 {i} 步的练习，我想每天晚上做一道。",
                "args": {"topic": "动态规划", "level": "medium", "limit": 3},
                "result": lambda r: {"questions": ["零钱兑换", "最长递增子序列", "编辑距离"], "avg_minutes": r.randint(25, 40)},
                "final": lambda v: (
                    f"推荐这三道：{'、'.join(v['questions'])}，平均每道大约 {v['avg_minutes']} 分钟。"
                    "做题时先写出状态定义和转移方程再写代码，做完用一句话总结这道题的状态是什么，三天后再重做一遍巩固。"
                ),
            },
            {
                "name": "search_questions",
                "ask": "第 {i} 步：搜一下 Go 并发方面面试官最爱问的几个问题，我想查漏补缺。",
                "args": {"topic": "Go 并发", "level": "senior", "limit": 3},
                "result": lambda r: {"questions": ["GMP 调度模型是怎样的？", "channel 关闭后读写会发生什么？", "如何排查 goroutine 泄漏？"], "source_count": r.randint(15, 45)},
                "final": lambda v: (
                    f"在 {v['source_count']} 份面经里出现最多的是：{'；'.join(v['questions'])}"
                    "前两个偏原理，回答时配一张简单的示意图更清楚；第三个偏实战，可以讲你用 pprof 的 goroutine 视图定位泄漏的经历。"
                ),
            },
        ],
    },
]

# ---------------------------------------------------------------------------
# Templates
# ---------------------------------------------------------------------------

H_EN = [
    "Let's move on to {topic} {ctx}. What would you recommend as a first step, and what is the most common mistake people make here?",
    "Okay, step {i} of this session: {topic}. Can you give me a short, concrete plan that I can follow today?",
    "I've been reading about {topic} but I'm not sure how it applies {ctx}. Could you explain the trade-offs in plain terms?",
    "Next question, about {topic}: which two or three decisions do I need to make {ctx}, and which one would you make first?",
    "Quick check on {topic} before we continue. Is there anything here that would block us later if we get it wrong now?",
]
R_EN = [
    "Coming back to {topic}, which we first discussed around step {prev}. Now that more is settled {ctx}, would you change anything?",
    "Step {i}, revisiting {topic}. Can you turn what we said earlier into a short checklist that I can actually tick off?",
    "I want to double-check {topic} once more {ctx}. Is the approach from step {prev} still the right call, or is there a safer option?",
]
F_EN = [
    "Before we go on, one thing to remember: {fact} ({tok}). With that in mind, what do you suggest for {topic}?",
    "Some context for you: {fact} ({tok}). Keeping that in mind, let's look at {topic} next. Where should we start?",
    "Important detail, please keep it: {fact} ({tok}). Now, step {i}: {topic}. What would you do first?",
]
A_EN = [
    "For {topic}, my suggestion is to keep it simple. {detail} Start with the smallest version that works, write the decision down, and only optimise once the basics are settled. This is step {i}, so there is still room to adjust.",
    "Good question. {detail} In practice the most common mistake with {topic} is deciding too early without checking the constraints, so confirm them first and then commit to one option.",
    "Here is how I would approach {topic} {ctx}. {detail} Do that first, check the result, and then we can refine the details in the next steps of this session.",
    "The main trade-off with {topic} is effort against flexibility. {detail} If you are unsure, pick the option that is easier to undo later; for this plan that is almost always the cheaper path.",
    "Two decisions matter most for {topic}: what to do first and what to postpone. {detail} I would settle the first today and leave the rest open until step {nxt} or so.",
]
RA_EN = [
    "Revisiting {topic}: {detail} Compared with step {prev}, I would keep the same direction but write it down as a checklist with an owner and a date, so nothing slips while we work on the rest.",
    "I would not change much about {topic}. {detail} The only adjustment is to double-check it against everything we have settled since step {prev}, which takes a few minutes and avoids surprises.",
    "Checklist for {topic}: confirm the constraint, do the first concrete action, verify the result, and note the decision. {detail} That keeps it consistent with what we agreed around step {prev}.",
]
FA_EN = [
    "Noted: {ack}. I will keep that in mind for the rest of the session. As for {topic}: {detail} That fits the constraint, and we can build on it in the next steps.",
    "Got it, {ack}. That changes a few details later on, but not the overall plan. For {topic}, {detail_lc} Let me know if anything else is fixed that I should respect.",
    "Thanks, I have recorded {ack}. On {topic}: {detail} I will check later suggestions against this so that we do not have to redo work.",
]
PRE_EN = "Let me check that with {tool}."

H_ZH = [
    "第 {i} 步，我们来看{topic}。我现在的理解还比较模糊，你能先讲一下最关键的点，再告诉我最容易踩的坑吗？",
    "接下来想搞清楚{topic}。结合{ctx}这件事，你建议我先做什么、后做什么？最好给一个今天就能动手的小计划。",
    "关于{topic}，我看了一些资料，但还不太确定怎么用在{ctx}上。能用通俗的话讲讲其中的取舍吗？",
    "继续推进：{topic}。这一块我需要做哪两三个决定？如果是你，会先定哪个？",
    "在往下走之前，想确认一下{topic}：如果现在做错了，后面会不会很难改？",
]
R_ZH = [
    "回到{topic}，大概第 {prev} 步的时候我们聊过。现在{ctx}的情况更清楚了，你觉得之前的结论需要调整吗？",
    "第 {i} 步，再过一遍{topic}。能把之前的讨论整理成一个可以逐项打勾的清单吗？",
    "我想再确认一次{topic}。第 {prev} 步的做法现在还合适吗？有没有更稳妥的替代方案？",
]
F_ZH = [
    "先补充一个背景：{fact}（{tok}）。在这个前提下，我们看看{topic}，你有什么建议？",
    "有个信息你记一下：{fact}（{tok}）。接下来第 {i} 步是{topic}，应该从哪里入手？",
    "重要前提，请一直记住：{fact}（{tok}）。那么{topic}这一块，你会怎么安排？",
]
A_ZH = [
    "关于{topic}，我的建议是先抓主干。{detail}先做一个能跑通的最小版本，把决定记下来，再考虑优化。现在是第 {i} 步，后面还有调整空间。",
    "这个问题问得好。{detail}实际中最常见的坑是没有确认约束就急着拍板，所以先把约束核对一遍，再选定一个方案。",
    "结合{ctx}，{topic}我会这样安排：{detail}先完成这一步并检查结果，细节在后面几步里再逐步完善。",
    "{topic}的主要取舍在投入和灵活性之间。{detail}拿不准的时候，优先选以后容易撤回的方案，通常也是成本更低的那条路。",
    "{topic}最关键的是两个决定：先做什么、什么可以往后放。{detail}我建议今天先定第一个，其余的留到第 {nxt} 步左右再说。",
]
RA_ZH = [
    "再看{topic}：{detail}和第 {prev} 步相比，方向不用变，但建议写成带负责人和日期的清单，免得在推进其他事情时遗漏。",
    "{topic}不需要大改。{detail}唯一的调整是用第 {prev} 步之后新确定的信息再核对一遍，几分钟就能做完，可以避免后面返工。",
    "{topic}的清单：确认约束、完成第一个具体动作、验证结果、记录决定。{detail}这样和第 {prev} 步时的约定保持一致。",
]
FA_ZH = [
    "记下了：{ack}。后面的建议我都会照这个前提来。关于{topic}：{detail}这和前提不冲突，后续可以在此基础上继续。",
    "好的，{ack}这一点我会记住，它会影响后面一些细节，但不影响整体安排。至于{topic}，{detail}还有其他固定的约束也请告诉我。",
    "收到，已经记录{ack}。关于{topic}：{detail}之后的每个建议我都会先对照这个前提检查一遍，避免返工。",
]
PRE_ZH = "我先用 {tool} 查一下。"

TEMPLATES = {
    "en": (H_EN, R_EN, F_EN, A_EN, RA_EN, FA_EN, PRE_EN),
    "zh": (H_ZH, R_ZH, F_ZH, A_ZH, RA_ZH, FA_ZH, PRE_ZH),
}

# Length bands: (human_min, human_max, ai_min, ai_max)
BANDS = {"en": (15, 60, 30, 120), "zh": (30, 120, 60, 240)}


def measure(text: str, lang: str) -> int:
    """Words for English, characters (whitespace excluded) for Chinese."""
    if lang == "en":
        return len(text.split())
    return len(re.sub(r"\s", "", text))


# ---------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------


def fact_turns(n_facts: int) -> list[int]:
    return [1 + FACT_EVERY * k for k in range(n_facts)]


def build_thread(spec: dict, rng: random.Random) -> list[list[dict]]:
    """Return the thread as a list of turns; each turn is a list of JSONL records."""
    tid, lang = spec["id"], spec["lang"]
    H, R, F, A, RA, FA, PRE = TEMPLATES[lang]
    topics = spec["topics"]
    n = spec["turns"]
    facts = dict(zip(fact_turns(len(spec["facts"])), spec["facts"]))
    candidates = [i for i in range(2, n + 1) if i not in facts]
    n_tools = max(2, round(n / 14))
    tool_turns = sorted(rng.sample(candidates, n_tools))
    tool_iter = iter(spec["tools"] * 2)

    turns = []
    for i in range(1, n + 1):
        topic, detail = topics[(i - 1) % len(topics)]
        revisit = i > len(topics)
        prev = i - len(topics)
        fmt = {
            "topic": topic,
            "detail": detail,
            "detail_lc": detail[0].lower() + detail[1:],
            "ctx": spec["ctx"],
            "i": i,
            "prev": prev,
            "nxt": i + rng.randint(2, 5),
        }
        if i in facts:
            k = list(facts).index(i) + 1
            fact, ack = facts[i]
            fmt.update(fact=fact, ack=ack, tok=f"FACT-{tid}-{k}")
            human = rng.choice(F).format(**fmt)
            answer = rng.choice(FA).format(**fmt)
        elif revisit:
            human = rng.choice(R).format(**fmt)
            answer = rng.choice(RA).format(**fmt)
        else:
            human = rng.choice(H).format(**fmt)
            answer = rng.choice(A).format(**fmt)

        records = [{"thread_id": tid, "role": "human", "content": human}]
        if i in tool_turns:
            tool = next(tool_iter)
            call_id = f"call_{tid}_{i:03d}"
            records[0]["content"] = tool["ask"].format(i=i)
            value = tool["result"](rng)
            records.append({
                "thread_id": tid,
                "role": "ai",
                "content": PRE.format(tool=tool["name"]),
                "tool_calls": [{"name": tool["name"], "args": tool["args"], "id": call_id}],
            })
            records.append({
                "thread_id": tid,
                "role": "tool",
                "content": json.dumps(value, ensure_ascii=False),
                "tool_call_id": call_id,
            })
            answer = tool["final"](value)
        records.append({"thread_id": tid, "role": "ai", "content": answer})
        turns.append(records)
    return turns


def check(records: list[dict]) -> None:
    """Self-check: length bands, unique texts, fact tokens appear exactly once, tool ids match."""
    lang = {t["id"]: t["lang"] for t in THREADS}
    seen: set[str] = set()
    calls: dict[str, set[str]] = {}
    tokens: list[str] = []
    for j, rec in enumerate(records):
        tid, role, text = rec["thread_id"], rec["role"], rec["content"]
        lo_h, hi_h, lo_a, hi_a = BANDS[lang[tid]]
        size = measure(text, lang[tid])
        if role == "human":
            assert lo_h <= size <= hi_h, (j, size, text)
        elif role == "ai" and "tool_calls" not in rec:
            assert lo_a <= size <= hi_a, (j, size, text)
        elif role == "ai":
            calls.setdefault(tid, set()).update(c["id"] for c in rec["tool_calls"])
        elif role == "tool":
            assert rec["tool_call_id"] in calls.get(tid, set()), (j, rec)
        if role in ("human", "ai") and "tool_calls" not in rec:
            assert text not in seen, ("duplicate text", j, text)
            seen.add(text)
        tokens += re.findall(r"FACT-[a-z]+-\d+", text)
    assert len(tokens) == len(set(tokens)) == sum(len(t["facts"]) for t in THREADS), tokens


def main() -> None:
    rng = random.Random(SEED)
    threads = {spec["id"]: build_thread(spec, rng) for spec in THREADS}
    order = [tid for tid, turns in threads.items() for _ in turns]
    rng.shuffle(order)
    position = dict.fromkeys(threads, 0)
    records: list[dict] = []
    for tid in order:
        records.extend(threads[tid][position[tid]])
        position[tid] += 1
    check(records)
    with open(OUT, "w", encoding="utf-8", newline="\n") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(f"wrote {OUT.name}: {len(records)} lines, {len(order)} turns, {len(threads)} threads")


if __name__ == "__main__":
    main()
