"""The settings page's tests (README "Web dashboard", "Managing the home"), run as part of the
Dashboard class in test_dashboard.py, whose browser, bridge, broker and helpers they use."""

import time
from datetime import datetime

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from harness import NETWORK_ERROR, USER1_ROOMS


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
