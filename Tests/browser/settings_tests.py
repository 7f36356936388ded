"""The settings page's tests (README "Web dashboard", "Managing the home"), run as part of the
Dashboard class in test_dashboard.py, whose browser, bridge, broker and helpers they use."""

import time
from datetime import datetime

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from harness import NETWORK_ERROR, PHONE, USER1_ROOMS


class SettingsTests:
    """Mixed into Dashboard: `self.driver`, `self.bridge`, `self.broker` and the helpers are its."""

    def test_11_settings_guests_and_unbound_devices(self):
        """Create a guest on the settings page, log in with its link and see only its rooms, revoke it;
        an admin sees unbound devices."""
        self.allowed_console = [NETWORK_ERROR.format(status=400), NETWORK_ERROR.format(status=401)]
        self.log_in()
        owner = self.token()
        self.click(self.find('[data-nav="settings"]'))
        self.wait_for(lambda d: d.find_element(By.ID, "guest-list").get_attribute("aria-busy") == "false", message="the guests")
        self.wait_for(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#guest-rooms input")) == len(USER1_ROOMS), message="the rooms")
        self.assertTrue(self.find("#guest-empty").is_displayed())
        self.assertFalse(self.find("#settings-devices").is_displayed(), "unbound devices are for admins")
        self.assertIsNotNone(self.find("#settings-rooms"), "the place for rooms and sensors")

        # No room picked: the bridge's message, as it is.
        self.click(self.find("#guest-submit"))
        self.wait_for(lambda d: "rooms" in (self.text_of("#guest-error") or ""), message="the error")
        self.assertEqual(self.text_of("#guest-error"), 'field "rooms" must name 1 to 16 rooms')

        self.click(self.find("#guest-room-kitchen"))
        self.click(self.find("#guest-room-garden"))
        Select(self.find("#guest-access")).select_by_value("read")
        Select(self.find("#guest-duration")).select_by_value("3600")
        self.click(self.find("#guest-submit"))
        self.wait_for(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#guest-list li")) == 1, message="the new guest")
        self.assertEqual(self.text_of("#guest-error"), "")
        [guest] = self.bridge.api("GET", "/guests", token=owner)[1]["guests"]
        self.assertEqual((guest["rooms"], guest["access"]), (["kitchen", "garden"], "read"))
        expires = datetime.fromisoformat(guest["expires"].replace("Z", "+00:00"))
        self.assertLess(abs((expires - datetime.now(expires.tzinfo)).total_seconds() - 3600), 120)
        self.assertEqual(self.text_of("#guest-list li .guest-rooms"), "Kitchen, Garden")
        self.assertIn("Sees only", self.text_of("#guest-list li .guest-meta"))
        link = self.find("#guest-list li .guest-link").get_attribute("value")
        self.assertEqual(link, f"{self.bridge.base}/#/guest/{guest['token']}")
        self.screenshots("settings")

        # The link, in a fresh tab's storage: the guest's rooms only, no owner's screens.
        self.driver.execute_script("sessionStorage.clear()")
        self.driver.get(link)
        self.wait_for(lambda d: self.room_names() == ["Kitchen", "Garden"], message="the guest's rooms")
        self.assertNotIn("guest", self.driver.current_url, "the token left the address bar")
        self.assertEqual(self.token(), guest["token"])
        for nav in ("alarms", "watchdogs", "settings"):
            self.assertFalse(self.find(f'[data-nav="{nav}"]').is_displayed(), f"{nav} shown to a guest")
        self.assertEqual(self.text_of("#logout"), "Leave")
        self.wait_for(lambda d: d.find_element(By.ID, "conn").get_attribute("data-state") == "live", 5, "live events")
        self.screenshots("guest-rooms")
        self.driver.get(self.bridge.base + "/#/rooms/livingroom")
        self.wait_for(lambda d: self.text_of("h1") == "Room not found", message="another room is not found")
        self.driver.get(self.bridge.base + "/#/alarms")
        self.wait_for(lambda d: self.room_names() == ["Kitchen", "Garden"], message="alarms lead back to the rooms")
        # Leaving forgets the token in this tab only: the link keeps working.
        self.click(self.find("#logout"))
        self.wait_for(lambda d: d.find_elements(By.ID, "login-form"), message="the login screen")
        self.assertEqual(self.bridge.api("GET", "/rooms", token=guest["token"])[0], 200)

        # Revoke: the link stops working at once.
        self.log_in()
        self.click(self.find('[data-nav="settings"]'))
        self.wait_for(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#guest-list li")) == 1, message="the guest")
        self.click(self.find("#guest-list li .guest-revoke"))
        self.wait_for(lambda d: self.find("#guest-empty").is_displayed(), message="no guests")
        self.assertEqual(self.bridge.api("GET", "/rooms", token=guest["token"])[0], 401)
        self.driver.execute_script("sessionStorage.clear()")
        self.driver.get(link)
        self.wait_for(lambda d: d.find_elements(By.ID, "login-form"), message="a revoked link leads to the login")
        self.wait_for(lambda d: "ended" in (self.text_of("#login-error") or ""), message="the reason")

        # An admin sees the devices no binding claims.
        self.driver.execute_script("sessionStorage.clear()")
        self.driver.refresh()
        self.wait_for(lambda d: d.find_elements(By.ID, "login-form"), message="the login screen")
        self.log_in("Mehmet", "123456")
        self.broker.publish("zigbee2mqtt/porch_motion", '{"occupancy":false,"battery":88}')
        self.click(self.find('[data-nav="settings"]'))
        self.wait_for(lambda d: self.find("#settings-devices").is_displayed(), message="the unbound devices")
        selector = '#device-list li[data-topic="zigbee2mqtt/porch_motion"]'
        for _ in range(20):
            if self.find_all(selector):
                break
            self.click(self.find("#device-refresh"))
            time.sleep(0.25)
        self.wait_for(lambda d: d.find_elements(By.CSS_SELECTOR, selector), message="the porch sensor")
        self.assertEqual(self.text_of(selector + " .device-binding"), '{"zigbee2mqtt":{"device":"porch_motion"}}')
        self.assertEqual(self.text_of(selector + " .device-payload"), '{"occupancy":false,"battery":88}')
        self.screenshots("settings-admin")

    def test_12_settings_rooms_create_bind_rename_delete(self):
        """Rooms on the settings page, at a desktop's width and a phone's: make one with a simulated
        and a bound sensor, bind an unbound device to it with a click, a refused change shown as the
        bridge words it, rename it, delete it; each checked on the bridge itself."""
        self.allowed_console = [NETWORK_ERROR.format(status=400), NETWORK_ERROR.format(status=409)]
        self.rooms_flow("Office", "office_lamp", "porch_motion_desk", "Study")
        self.driver.execute_script("sessionStorage.clear()")
        self.driver.get(self.bridge.base + "/#/login")
        self.driver.refresh()
        self.wait_for(lambda d: d.find_elements(By.ID, "login-form"), message="the login screen")
        width, height = PHONE
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                    {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": True})
        self.addCleanup(self.driver.execute_cdp_cmd, "Emulation.clearDeviceMetricsOverride", {})
        self.rooms_flow("Workshop", "workshop_lamp", "gate_motion_phone", "Garage", phone=width, as_json=True)

    # ---- the rooms flow's steps ----

    def settings_rooms(self):
        """{room id: (title, origin, {sensor: binding text})} as the page lists them."""
        rooms = {}
        for item in self.find_all("#settings-room-list > li"):
            sensors = {s.get_attribute("data-sensor"): s.find_element(By.CSS_SELECTOR, ".binding-text").text
                       for s in item.find_elements(By.CSS_SELECTOR, ".binding-list li")}
            rooms[item.get_attribute("data-uuid")] = (item.find_element(By.CSS_SELECTOR, ".settings-room-title").text,
                                                      item.get_attribute("data-origin"), sensors)
        return rooms

    def detail(self, token):
        status, rooms = self.bridge.api("GET", "/rooms?detail=1", token=token)
        self.assertEqual(status, 200)
        return {room["id"]: room for room in rooms}

    def submit_room_form(self):
        self.click(self.find("#settings-room-submit"))
        self.wait_for(lambda d: d.find_element(By.ID, "settings-room-submit").get_attribute("aria-disabled") is None,
                      message="the bridge's answer")

    def assert_fits(self, phone, what):
        if phone:
            page_width = self.driver.execute_script("return document.documentElement.scrollWidth")
            self.assertLessEqual(page_width, phone, f"{what} is wider than a {phone} px phone")

    def rooms_flow(self, name, lamp, device, renamed, phone=None, as_json=False):
        """The steps, as a user would take them; `as_json`: the light's binding typed as JSON, after a
        text that isn't JSON (which the page refuses itself, naming the sensor)."""
        room = name.lower()
        self.log_in("Mehmet", "123456")  # an admin: the unbound devices are shown (README, "The settings page")
        token = self.token()
        # Should a step fail, the room goes all the same: the later tests know user 2's rooms.
        self.addCleanup(self.bridge.api, "DELETE", f"/rooms/{room}", None, token)
        self.click(self.find('[data-nav="settings"]'))
        self.wait_for(lambda d: d.find_element(By.ID, "settings-room-list").get_attribute("aria-busy") == "false",
                      message="the rooms")
        before = self.settings_rooms()
        self.assertEqual(set(before), set(self.detail(token)))
        # The config file's rooms are listed, marked as the file's, without Edit or Delete.
        self.assertEqual(before["attic"][1:], ("file", {"Temperature": "MQTT devices/attic/temperature",
                                                        "Humidity": "MQTT devices/attic/humidity",
                                                        "Lights": "simulated", "Movement": "simulated"}))
        attic = self.find('#settings-room-list li[data-uuid="attic"]')
        self.assertIn("config file", attic.find_element(By.CSS_SELECTOR, ".settings-room-origin").text)
        self.assertEqual(attic.find_elements(By.CSS_SELECTOR, ".settings-room-edit, .settings-room-delete"), [])
        self.assert_fits(phone, "the settings page")

        # A new room: a simulated Temperature (the form's first row) and a light bound to a Tasmota plug.
        watcher = self.broker.subscribe(f"smarthome/2/{room}/availability", f"smarthome/2/{room}/movement")
        self.addCleanup(watcher.close)
        self.type_into("#settings-room-name", name)
        self.click(self.find("#settings-room-add-sensor"))
        self.type_into("#settings-room-sensors li:nth-child(2) .sensor-row-name", "Lights")
        binding = "#settings-room-sensors li:nth-child(2) .sensor-row-binding"
        if as_json:
            Select(self.find("#settings-room-sensors li:nth-child(2) .sensor-row-kind")).select_by_value("json")
            self.type_into(binding, '{"tasmota": {"topic": ')
            self.submit_room_form()
            self.assertTrue(self.text_of("#settings-room-error").startswith("sensors[1]: the binding is not a JSON object"))
            self.assertNotIn(room, self.detail(token))
            self.type_into(binding, f'{{"tasmota": {{"topic": "{lamp}"}}}}')
        else:
            Select(self.find("#settings-room-sensors li:nth-child(2) .sensor-row-kind")).select_by_value("tasmota")
            self.type_into(binding, lamp)
        self.submit_room_form()
        self.assertEqual(self.text_of("#settings-room-error"), "")
        self.wait_for(lambda d: room in self.settings_rooms(), message=f"{name} in the list")
        self.assertEqual(self.settings_rooms()[room], (name, "api", {"Temperature": "simulated", "Lights": f"Tasmota {lamp}"}))
        self.assertEqual(self.detail(token)[room], {"id": room, "name": name, "origin": "api",
                                                    "sensors": ["Temperature", {"name": "Lights", "tasmota": {"topic": lamp}}]})
        watcher.wait_for(f"smarthome/2/{room}/availability online")
        self.assertEqual(self.find("#settings-room-name").get_attribute("value"), "", "the form is cleared")

        # Refused: the same name again (409), an empty name (400): the bridge's message, nothing changed.
        for bad, body in ((name, {"name": name, "sensors": ["Temperature"]}), ("", {"name": "", "sensors": ["Temperature"]})):
            listed, stored = self.settings_rooms(), self.detail(token)
            status, expected = self.bridge.api("POST", "/rooms", body, token=token)
            self.assertIn(status, (400, 409))
            self.type_into("#settings-room-name", bad)
            self.submit_room_form()
            self.wait_for(lambda d: self.text_of("#settings-room-error") == expected["error"]["message"],
                          message=f"the bridge's message for {body}")
            self.assertEqual(self.settings_rooms(), listed)
            self.assertEqual(self.detail(token), stored)
        self.find("#settings-room-name").clear()

        # An unbound device, bound with a click to the new room's movement sensor.
        self.broker.publish(f"zigbee2mqtt/{device}", '{"occupancy":false,"battery":90}')
        selector = f'#device-list li[data-topic="zigbee2mqtt/{device}"]'
        for _ in range(20):
            if self.find_all(selector):
                break
            self.click(self.find("#device-refresh"))
            time.sleep(0.25)
        self.wait_for(lambda d: d.find_elements(By.CSS_SELECTOR, selector), message=f"the device {device}")
        self.click(self.find(selector + " .device-bind"))
        self.wait_for(lambda d: d.find_elements(By.CSS_SELECTOR, selector + " .bind-panel"), message="the bind panel")
        self.assertEqual(Select(self.find(selector + " .bind-sensor")).first_selected_option.text, "Movement",
                         "the sensor its payload suggests")
        Select(self.find(selector + " .bind-room")).select_by_value(room)
        self.assert_fits(phone, "the bind panel")
        if not phone:
            self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", self.find(selector))
            self.screenshots("settings-bind")
        self.click(self.find(selector + " .bind-confirm"))
        self.wait_for(lambda d: not d.find_elements(By.CSS_SELECTOR, selector), message="the device leaves the list")
        self.wait_for(lambda d: "Movement" in self.settings_rooms()[room][2], message="the bound sensor")
        self.assertEqual(self.settings_rooms()[room][2]["Movement"], f"zigbee2mqtt device {device}")
        self.assertEqual(self.detail(token)[room]["sensors"][-1], {"name": "Movement", "zigbee2mqtt": {"device": device}})
        status, unbound = self.bridge.api("GET", "/devices/unbound", token=token)
        self.assertEqual(status, 200)
        self.assertNotIn(f"zigbee2mqtt/{device}", [d["topic"] for d in unbound["devices"]])
        # The bridge reads the device now: its message is the room's movement.
        self.broker.publish(f"zigbee2mqtt/{device}", '{"occupancy":true,"battery":90}')
        watcher.wait_for(f"smarthome/2/{room}/movement ON")
        self.click(self.find("#device-refresh"))
        self.wait_for(lambda d: d.find_element(By.ID, "device-list").get_attribute("aria-busy") == "false", message="the list")
        self.assertEqual(self.find_all(selector), [], "a bound device is not listed again")
        if not phone:
            self.screenshots("settings-rooms")

        # Renamed: the id and the sensors stay.
        self.click(self.find(f'#settings-room-list li[data-uuid="{room}"] .settings-room-edit'))
        self.wait_for(lambda d: d.find_element(By.ID, "settings-room-name").get_attribute("value") == name, message="the form filled")
        self.assertEqual(len(self.find_all("#settings-room-sensors > li")), 3)
        self.assert_fits(phone, "the room form")
        self.type_into("#settings-room-name", renamed)
        self.submit_room_form()
        self.wait_for(lambda d: self.settings_rooms()[room][0] == renamed, message="the new name")
        self.assertEqual(self.text_of("#settings-room-error"), "")
        stored = self.detail(token)[room]
        self.assertEqual((stored["name"], stored["sensors"]),
                         (renamed, ["Temperature", {"name": "Lights", "tasmota": {"topic": lamp}},
                                    {"name": "Movement", "zigbee2mqtt": {"device": device}}]))
        status, shape = self.bridge.api("GET", f"/rooms/{renamed}", token=token)
        self.assertEqual(status, 200)
        self.assertIn(renamed, self.bridge.api("GET", "/rooms", token=token)[1]["rooms"])

        # Deleted after its confirmation: gone from the page and the bridge.
        self.click(self.find(f'#settings-room-list li[data-uuid="{room}"] .settings-room-delete'))
        self.click(self.wait_for(lambda d: d.find_element(By.CSS_SELECTOR, f'li[data-uuid="{room}"] .settings-room-confirm'),
                                 message="the confirmation"))
        self.wait_for(lambda d: room not in self.settings_rooms(), message=f"{renamed} gone from the page")
        self.assertEqual(self.settings_rooms(), before)
        self.assertEqual(self.bridge.api("GET", f"/rooms/{room}", token=token)[0], 404)
        self.assertNotIn(room, self.detail(token))
        # Its retained availability cleared: an empty message, which mosquitto_sub -v shows as "(null)".
        watcher.wait_for(f"smarthome/2/{room}/availability (null)")

    def test_13_settings_rooms_words(self):
        """The rooms list's words for each binding and the sensor a device's payload suggests, run in the page."""
        result = self.driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            import('./js/views/settings-rooms.js').then((rooms) => done({
              words: ['Gas',
                      {name: 'Movement', zigbee2mqtt: {device: 'hall', field: 'presence'}},
                      {name: 'Lights', tasmota: {topic: 'plug', relay: 2}},
                      {name: 'Lights', shelly: {prefix: 'shellyplus1-a', id: 0}},
                      {name: 'Lights', esphome: {prefix: 'esp', component: 'switch', object_id: 'lamp'}},
                      {name: 'Temperature', rtl_433: {model: 'Bresser-6in1', id: '411042499', channel: '1'}, expire_after: '10m'},
                      {name: 'Lights', mqtt: {command_topic: 'home/lamp/set', state_topic: 'home/lamp'}},
                      {name: 'Humidity', http: {url: 'http://192.168.1.30/status', value: '/hum'}}].map(rooms.bindingText),
              suggested: ['{"occupancy":true}', '{"temperature_C":3.5,"model":"x"}', '{"POWER":"ON"}', 'not json', '{}']
                .map((payload) => rooms.suggestedSensor({payload}))}),
              (error) => done({error: String(error)}));""")
        self.assertNotIn("error", result)
        self.assertEqual(result["words"], [
            "simulated", "zigbee2mqtt device hall · field presence", "Tasmota plug · relay 2", "Shelly shellyplus1-a · switch 0",
            "ESPHome esp/switch/lamp", "rtl_433 Bresser-6in1 id 411042499 · channel 1 · stale after 10m",
            "commands to home/lamp/set · state from home/lamp", "HTTP http://192.168.1.30/status · value /hum"])
        self.assertEqual(result["suggested"], ["Movement", "Temperature", "Lights", "Temperature", "Temperature"])
