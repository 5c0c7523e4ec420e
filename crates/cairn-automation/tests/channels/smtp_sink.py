"""A local SMTP server for the email channel test (aiosmtpd).

Usage: python smtp_sink.py OUT_DIR
Listens on a free 127.0.0.1 port and prints "PORT <n>" once it accepts
connections. Each message is written to OUT_DIR/<n>.json, parsed by
Python's email package, with its envelope. Recipients whose local part is
"tempfail" get a 451 reply, "reject" a 550 one.
"""

import asyncio
import email
import email.policy
import json
import pathlib
import sys

from aiosmtpd.smtp import SMTP


class Sink:
    def __init__(self, out):
        self.out = out
        self.count = 0

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        local = address.split("@", 1)[0]
        if local == "tempfail":
            return "451 4.3.0 Mailbox busy, try again later"
        if local == "reject":
            return "550 5.1.1 No such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.count += 1
        message = email.message_from_bytes(envelope.original_content, policy=email.policy.default)
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "from": str(message["From"]),
            "to": str(message["To"]),
            "subject": str(message["Subject"]),
            "message_id": str(message["Message-ID"]),
            "x_priority": str(message["X-Priority"]),
            "content_type": message.get_content_type(),
            "date_present": message["Date"] is not None,
            # The wire form has CRLF line ends; the test compares text.
            "body": message.get_content().replace("\r\n", "\n"),
        }
        path = self.out / f"{self.count}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record), encoding="utf-8")
        tmp.rename(path)
        return f"250 2.0.0 Ok: queued as cairn-test-{self.count}"


async def main():
    out = pathlib.Path(sys.argv[1])
    sink = Sink(out)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: SMTP(sink, hostname="sink.test"), "127.0.0.1", 0
    )
    print("PORT", server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
