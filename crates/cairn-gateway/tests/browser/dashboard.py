"""Drives the dashboard in Debian's chromium through selenium, against a live
gateway over the fake LLM (tests/dashboard_browser.rs starts both and
scripts the LLM). Every acceptance step of issue 26; axe-core on every page;
no request to another origin; no sideways scroll at 390 px; a screenshot of
every page. Fails with a message naming the step; prints a JSON summary.

    python dashboard.py BASE PAIRING_CODE AXE_JS SCREENSHOT_DIR
"""
import json
import os
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

BASE, CODE, AXE, SHOTS = sys.argv[1:5]
os.makedirs(SHOTS, exist_ok=True)
summary = {"pages": {}, "steps": []}


# Markup planted in an answer, a notification and a memory: shown as text.
HOSTILE = '<img src=x onerror="window.__xss=1"><b id=xss>bold</b>'


def step(name):
    summary["steps"].append(name)
    print(f"step: {name}", file=sys.stderr, flush=True)


options = webdriver.ChromeOptions()
options.binary_location = os.environ.get("CAIRN_TEST_CHROMIUM", "/usr/bin/chromium")
for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--window-size=1280,900", "--force-prefers-reduced-motion", "--lang=en-US"]:
    options.add_argument(arg)
options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
service = Service(executable_path=os.environ.get("CAIRN_TEST_CHROMEDRIVER", "/usr/bin/chromedriver"))
driver = webdriver.Chrome(options=options, service=service)
# Views redraw (the chat when it reconnects): an element found a moment ago may be gone; look again.
wait = WebDriverWait(driver, 15, ignored_exceptions=[StaleElementReferenceException])
axe_source = open(AXE, encoding="utf-8").read()
requested = set()


def tid(name, extra=""):
    return (By.CSS_SELECTOR, f'[data-testid="{name}"]{extra}')


def find(name, extra=""):
    return wait.until(EC.presence_of_element_located(tid(name, extra)))


def click(name, extra=""):
    el = wait.until(EC.element_to_be_clickable(tid(name, extra)))
    el.click()
    return el


def collect_requests():
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            requested.add(message["params"]["request"]["url"])
        elif message.get("method") == "Network.webSocketCreated":
            requested.add(message["params"]["url"])


def axe(page):
    # Once per document: the dashboard never reloads, so axe stays loaded.
    if driver.execute_script("return typeof window.axe === 'undefined'"):
        driver.execute_script(axe_source)
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']})"
        ".then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,"
        " targets: v.nodes.slice(0, 5).map(n => n.target.join(' '))}))))"
        ".catch(e => done({error: String(e)}));")
    assert not isinstance(result, dict), f"axe failed on {page}: {result}"
    bad = [v for v in result if v["impact"] in ("critical", "serious")]
    assert not bad, f"axe on {page}: {json.dumps(bad, indent=1)}"
    return [f'{v["id"]} ({v["impact"]})' for v in result]


def phone(on):
    if on:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True})
    else:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def check_page(name):
    """axe, a desktop screenshot, then at 390 px: no sideways scroll, a phone screenshot."""
    time.sleep(0.2)  # let the view's reads finish drawing
    minor = axe(name)
    driver.save_screenshot(os.path.join(SHOTS, f"{name}.png"))
    phone(True)
    time.sleep(0.1)
    widths = driver.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth, document.body.scrollWidth];")
    assert widths[0] <= widths[1] and widths[2] <= widths[1], f"{name} scrolls sideways at 390 px: {widths}"
    # The phone's menu (the header with its menu button) takes at most 8 % of an 844 px screen.
    header = driver.execute_script("return document.querySelector('.top').getBoundingClientRect().height")
    assert header <= 0.08 * 844, f"{name}: the header is {header} px tall at 390 px"
    driver.save_screenshot(os.path.join(SHOTS, f"{name}-390px.png"))
    phone(False)
    summary["pages"][name] = {"axe_minor": minor, "width_390": widths, "header_390": header}


def nav(name):
    click(f"nav-{name}")
    wait.until(lambda d: d.find_element(*tid(f"nav-{name}")).get_attribute("aria-current") == "page")


try:
    step("sign in with a pairing code")
    driver.get(BASE + "/")
    code_input = find("pair-code")
    check_page("sign-in")
    code_input.send_keys(CODE)
    click("pair-submit")
    wait.until(EC.visibility_of_element_located(tid("nav-home")))
    cookies = driver.get_cookies()
    session = [c for c in cookies if c["name"] == "cairn_session"]
    assert session and session[0]["httpOnly"] and session[0].get("sameSite") == "Strict", cookies
    assert driver.execute_script("return document.cookie") == "", "the session cookie is readable by scripts"
    # Set once: a reload would lose it, so later checks prove nothing reloaded.
    driver.execute_script("window.__cairnNoReload = 'kept';")
    find("health")
    # A first run: what to do next, not the daemon's component names.
    start = find("first-run")
    wait.until(lambda d: d.find_element(*tid("first-run")).is_displayed())
    assert "Pair a phone" in start.text and "Make a first routine" in start.text, start.text
    assert "session_pruning" not in driver.find_element(By.ID, "main").text
    check_page("home")

    step("phone: the menu button opens the links and a link closes it")
    phone(True)
    click("nav-menu")
    wait.until(lambda d: d.find_element(*tid("nav-inbox")).is_displayed())
    click("nav-inbox")
    wait.until(lambda d: not d.find_element(*tid("nav-inbox")).is_displayed())
    assert driver.find_element(*tid("nav-menu")).get_attribute("aria-expanded") == "false"
    phone(False)
    nav("home")

    step("keyboard: the navigation and the skip link by Tab")
    driver.execute_script("document.querySelector('[data-testid=nav-home]').focus();")
    active = lambda: driver.switch_to.active_element
    active().send_keys(Keys.TAB)
    assert active().get_attribute("data-testid") == "nav-chat", "Tab from Home does not reach Chat"
    active().send_keys(Keys.SHIFT, Keys.TAB)
    active().send_keys(Keys.SHIFT, Keys.TAB)
    assert active().get_attribute("class") == "skip", "the skip link is not before the navigation"
    active().send_keys(Keys.ENTER)
    wait.until(lambda d: d.switch_to.active_element.get_attribute("id") == "main")
    active().send_keys(Keys.TAB)
    assert active().get_attribute("href"), "Tab from the main area reaches no link"

    step("chat: the answer streams in, after a thinking indicator, and is rendered as Markdown")
    nav("chat")
    wait.until(lambda d: "Conversation" in d.find_element(By.ID, "chat-state").text)
    driver.execute_script(
        "window.__chunks = 0; window.__thinking = 0;"
        "new MutationObserver((ms) => { window.__chunks++; for (const m of ms) for (const n of m.addedNodes)"
        " if (n.dataset && n.dataset.testid === 'chat-thinking') window.__thinking++; })"
        ".observe(document.querySelector('.chat-log'), {subtree: true, characterData: true, childList: true});")
    find("chat-input").send_keys("hello")
    click("chat-send")
    wait.until(lambda d: any("streamed in small pieces" in m.text
                             for m in d.find_elements(*tid("chat-message", '[data-role="assistant"]'))))
    # The turn ends with its `done` (a message sent before would interrupt it).
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR, ".chat-log").get_attribute("data-busy") == "false")
    said = [m.text for m in driver.find_elements(*tid("chat-message", '[data-role="assistant"]'))]
    assert any(HOSTILE in t for t in said), f"the answer's markup is not shown as text: {said}"
    chunks = driver.execute_script("return window.__chunks")
    assert chunks >= 4, f"the answer arrived in {chunks} updates, not streamed"
    summary["chat_updates"] = chunks
    assert driver.execute_script("return window.__thinking") >= 1, "no thinking indicator after sending"
    assert not driver.find_elements(*tid("chat-thinking")), "the thinking indicator stayed"
    rendered = (By.CSS_SELECTOR, '[data-testid="chat-message"][data-role="assistant"]')
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '[data-role="assistant"] table'))
    answer = driver.find_elements(*rendered)[-1]
    for tag in ["strong", "code", "table"]:
        assert answer.find_elements(By.TAG_NAME, tag), f"no <{tag}> in the rendered answer"
    assert HOSTILE in answer.text, f"the raw HTML is not shown as text: {answer.text}"
    # The composer stays on screen.
    assert driver.execute_script(
        "const r = document.querySelector('.composer').getBoundingClientRect(); return r.bottom <= innerHeight + 1;"
    ), "the composer is below the fold"
    check_page("chat")

    step("chat: approve a tool from the page")
    find("chat-input").send_keys("please write it down")
    click("chat-send")
    card = find("approval-card")
    assert card.get_attribute("data-risk") == "write", card.get_attribute("data-risk")
    assert card.text.count("{") <= 1, f"the arguments are shown more than once: {card.text}"
    click("approval-approve")
    wait.until(lambda d: any("written it" in m.text
                             for m in d.find_elements(*tid("chat-message", '[data-role="assistant"]'))))
    said = [m.text for m in driver.find_elements(*tid("chat-message"))]
    assert any("writer: success" in t for t in said), said
    assert not any("Interrupted" in t for t in said), said
    assert find("approval-card").get_attribute("data-decision") == "approve", "the decided card does not say so"

    step("chat: the history comes back after a reload")
    idle = lambda d: d.find_element(By.CSS_SELECTOR, ".chat-log").get_attribute("data-busy") == "false"
    wait.until(idle)
    user_said = lambda d: [m.text for m in d.find_elements(*tid("chat-message", '[data-role="user"]'))]
    driver.refresh()
    driver.execute_script("window.__cairnNoReload = 'kept';")
    wait.until(lambda d: user_said(d) == ["hello", "please write it down"])
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '[data-role="assistant"] strong'))
    assert any("written it" in m.text for m in driver.find_elements(*tid("chat-message", '[data-role="assistant"]')))

    step("chat: New thread shows an empty thread and posts nothing; switching back shows the history")
    click("chat-new-thread")
    options = (By.CSS_SELECTOR, "#chat-thread option")
    wait.until(lambda d: len(d.find_elements(*options)) == 2)
    wait.until(lambda d: not d.find_elements(*tid("chat-message")))
    assert "new thread" in driver.find_element(By.ID, "chat-state").text.lower()
    first = [o for o in driver.find_elements(*options) if not o.is_selected()][0]
    assert first.text.startswith("hello · "), f"the thread is not named by its first message: {first.text}"
    wanted = first.get_attribute("value")
    Select(driver.find_element(By.ID, "chat-thread")).select_by_value(wanted)
    click("chat-switch")
    wait.until(lambda d: user_said(d) == ["hello", "please write it down"])
    checked = driver.find_element(By.CSS_SELECTOR, "#chat-thread option:checked").get_attribute("value")
    assert checked == wanted, f"the session's thread is {checked}, not {wanted}"
    assert not any(t.startswith("/") for t in user_said(driver)), user_said(driver)

    step("chat: the agent switcher talks to family, whose threads are its own, and is remembered")
    picker = find("chat-agent")
    assert picker.is_displayed(), "no agent switcher with two agents"
    assert [o.get_attribute("value") for o in Select(picker).options] == ["main", "family"]
    main_conversation = driver.execute_script("return sessionStorage.getItem('cairn.conversation')")
    Select(picker).select_by_value("family")
    wait.until(lambda d: "with family" in d.find_element(By.ID, "chat-state").text)
    assert not driver.find_elements(*tid("chat-message")), "family's chat shows main's messages"
    find("chat-input").send_keys("who are you?")
    click("chat-send")
    wait.until(lambda d: any("Pip here" in m.text
                             for m in d.find_elements(*tid("chat-message", '[data-role="assistant"]'))))
    wait.until(idle)
    # One thread of its own: no thread switcher (main's session had two threads).
    assert not driver.find_element(By.ID, "chat-thread").is_displayed(), "family shows main's threads"
    nav("home")
    nav("chat")
    wait.until(lambda d: "with family" in d.find_element(By.ID, "chat-state").text)
    assert Select(find("chat-agent")).first_selected_option.get_attribute("value") == "family"
    Select(find("chat-agent")).select_by_value("main")
    wait.until(lambda d: f"Conversation {main_conversation} with main" in d.find_element(By.ID, "chat-state").text)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#chat-thread option")) == 2)

    step("routines: create from the form, the preview shows 09:00")
    nav("routines")
    click("routine-new")
    step("routines: a problem shows next to its field")
    find("routine-schedule").send_keys("every blursday")
    # The preview's answer moves the form down: click Save once it is drawn,
    # not while the button is moving (the click would land elsewhere).
    wait.until(lambda d: "blursday" in d.find_element(*tid("routine-schedule-preview")).text)
    click("routine-save")
    error = (By.CSS_SELECTOR, '.field-error[data-path="trigger.schedule"]')
    wait.until(lambda d: d.find_element(*error).text.strip() != "")
    summary["schedule_error"] = driver.find_element(*error).text
    problems = find("routine-error")
    wait.until(lambda d: d.switch_to.active_element.get_attribute("data-testid") == "routine-error")
    box = driver.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return [r.top, r.bottom, innerHeight];", problems)
    assert box[0] >= 0 and box[0] < box[2], f"the problem summary is not in view: {box}"
    assert "blursday" in problems.text, problems.text
    driver.save_screenshot(os.path.join(SHOTS, "routine-error.png"))
    # Its link leads to the field.
    [a for a in problems.find_elements(By.TAG_NAME, "a") if "blursday" in a.text][0].click()
    assert driver.switch_to.active_element.get_attribute("data-testid") == "routine-schedule"
    find("routine-schedule").clear()
    step("routines: create from the form, the preview shows 09:00 (continued)")
    find("routine-name").send_keys("coffee")
    find("routine-schedule").send_keys("every day at 9am")
    fires = (By.CSS_SELECTOR, '[data-testid="routine-schedule-preview"] li')
    wait.until(lambda d: len(d.find_elements(*fires)) == 5)
    assert all("09:00" in li.text for li in driver.find_elements(*fires)), \
        [li.text for li in driver.find_elements(*fires)]
    # The problem was about the value saved then; the edit cleared it.
    assert driver.find_element(*error).text.strip() == "", driver.find_element(*error).text
    summary["preview"] = driver.find_element(*tid("routine-schedule-preview")).text
    Select(find("routine-action-type")).select_by_value("notification")
    find("routine-message").send_keys("Time for coffee " + HOSTILE)
    check_page("routine-form")
    driver.execute_script("document.querySelector('input[name=enabled]').scrollIntoView({block: 'center'})")
    driver.save_screenshot(os.path.join(SHOTS, "routine-checkboxes.png"))
    click("routine-save")
    find("routine-row", '[data-name="coffee"]')
    wait.until(lambda d: "every day at 9am" in d.find_element(By.TAG_NAME, "pre").text)

    step("routines: fire it, the run and its notification appear without reloading")
    assert not driver.find_elements(*tid("run-row"))
    click("routine-fire")
    find("run-row")
    wait.until(lambda d: "unread" in d.find_element(*tid("nav-inbox")).text)
    check_page("routine")
    nav("routines")
    find("routine-row", '[data-name="coffee"]')
    check_page("routines")

    step("routines: a webhook routine shows its URL")
    nav("routines")
    click("routine-new")
    find("routine-name").send_keys("hook")
    Select(driver.find_element(By.NAME, "trigger")).select_by_value("webhook")
    wait.until(lambda d: "/hooks/routine/hook" in d.find_element(*tid("routine-webhook-url")).text)
    Select(find("routine-action-type")).select_by_value("notification")
    find("routine-message").send_keys("hooked")
    click("routine-save")
    wait.until(lambda d: d.find_element(*tid("routine-webhook-url", ":not(div)")).text == BASE + "/hooks/routine/hook")
    assert BASE + "/hooks/routine/hook" in find("routine-webhook-curl").text

    step("routines: the built-in heartbeat opens read-only but for enabled and notify, and saves")
    driver.get(BASE + "/#/routines/heartbeat/edit")
    driver.execute_script("window.__cairnNoReload = 'kept';")
    find("routine-builtin")
    assert not driver.find_elements(*tid("routine-action-type")), "the built-in routine's action is editable"
    enabled = find("routine-enabled")
    assert enabled.is_selected()
    enabled.click()
    click("routine-save")
    wait.until(lambda d: "disabled" in d.find_element(By.ID, "main").text and "/edit" not in d.current_url)

    step("routines: with several agents, the form chooses the one that runs it")
    nav("routines")
    click("routine-new")
    find("routine-name").send_keys("tea")
    Select(driver.find_element(By.NAME, "trigger")).select_by_value("manual")
    agents = Select(find("routine-agent"))
    assert [o.get_attribute("value") for o in agents.options] == ["main", "family"], \
        [o.text for o in agents.options]
    assert agents.first_selected_option.get_attribute("value") == "main"
    agents.select_by_value("family")
    Select(find("routine-action-type")).select_by_value("notification")
    find("routine-message").send_keys("Time for tea")
    click("routine-save")
    wait.until(lambda d: "agent: family" in d.find_element(By.TAG_NAME, "pre").text)
    nav("inbox")
    row = find("notification-row", '[data-unread="true"]')
    assert "Time for coffee" in row.text, row.text
    check_page("inbox")
    click("mark-read")
    find("notification-row", '[data-unread="false"]')
    wait.until(lambda d: d.find_element(*tid("nav-inbox")).text == "Inbox")
    assert driver.execute_script("return window.__cairnNoReload") == "kept", "the page reloaded"

    step("memory: add, search shows how each hit matched and its score")
    nav("memory")
    driver.find_element(By.ID, "memory-text").send_keys("My phone is a Pixel 8 " + HOSTILE)
    driver.find_element(By.ID, "memory-add").click()
    find("memory-result")
    search = find("memory-search")
    search.send_keys("phone", Keys.ENTER)
    hit = find("memory-result", '[data-matched-by="keyword"]')
    assert "Pixel 8" in hit.text and "score" in hit.text, hit.text
    check_page("memory")

    step("costs, status, watchers and tasks render")
    nav("costs")
    chart = find("cost-chart")
    assert chart.tag_name == "svg" and chart.find_elements(By.CSS_SELECTOR, "rect.bar"), "no bars"
    family = find("agent-cost", '[data-agent="family"]')
    assert "$0.0120" in family.text and "Global budget only" in family.text, family.text
    check_page("costs")
    nav("status")
    wait.until(lambda d: len(d.find_elements(*tid("component-row"))) >= 3)
    check_page("status")
    nav("tasks")
    wait.until(lambda d: "Watchers" in d.find_element(By.ID, "main").text)
    check_page("tasks")
    nav("home")
    find("run-row")
    assert driver.execute_script("return window.__cairnNoReload") == "kept", "the page reloaded"

    step("markup in answers, notifications and memories is shown as text, never run")
    assert driver.execute_script("return window.__xss === undefined"), "injected markup ran"
    assert not driver.find_elements(By.CSS_SELECTOR, 'img[src="x"], b#xss'), "injected markup became elements"
    nav("inbox")
    assert HOSTILE in find("notification-row").text, "the notification's markup is not shown as text"

    step("no resource from another origin")
    collect_requests()
    host = BASE.split("://", 1)[1]
    foreign = sorted(u for u in requested
                     if not (u.startswith(BASE + "/") or u == BASE or u.startswith(f"ws://{host}/") or u.startswith("data:")))
    assert not foreign, f"requests to other origins: {foreign}"
    summary["requests"] = len(requested)

    step("dark: the system's dark scheme, still accessible")
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    bg = driver.execute_script("return getComputedStyle(document.body).backgroundColor")
    assert bg == "rgb(13, 17, 23)", f"the dark scheme is not applied: {bg}"
    check_page("home-dark")
    nav("routines")
    find("routine-row", '[data-name="coffee"]')
    check_page("routines-dark")
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})

    step("sign out")
    driver.find_element(By.ID, "sign-out").click()
    find("pair-code")
    driver.get(BASE + "/")
    find("pair-code")
except Exception:
    driver.save_screenshot(os.path.join(SHOTS, "failure.png"))
    print(f"failed at: {summary['steps'][-1] if summary['steps'] else 'start'}", file=sys.stderr)
    print(driver.page_source[:4000], file=sys.stderr)
    for entry in driver.get_log("browser"):
        print(f"console: {entry['level']} {entry['message']}", file=sys.stderr)
    raise
finally:
    driver.quit()

print(json.dumps(summary))
