#!/usr/bin/env bash
# Sign Draftlight.app, put it in a DMG with a link to /Applications, notarize and staple.
#
#   packaging/make_dmg.sh [path/to/Draftlight.app]     (default: dist/Draftlight.app)
#
# Writes dist/Draftlight-<version>.dmg. Signing and notarization are driven by the
# environment and skipped, with a line saying so, when it does not provide them:
#
#   MACOS_SIGN_IDENTITY      a "Developer ID Application: ..." identity in the keychain
#   MACOS_NOTARY_APPLE_ID    the Apple ID that submits to the notary service
#   MACOS_NOTARY_TEAM_ID     its team id
#   MACOS_NOTARY_PASSWORD    an app-specific password for that Apple ID
#
# Without a signature the app keeps PyInstaller's ad-hoc one: it runs on the machine that
# built it, and elsewhere only once the user allows it (docs/install.md).
set -euo pipefail
cd "$(dirname "$0")/.."

APP="${1:-dist/Draftlight.app}"
ENTITLEMENTS="packaging/entitlements.plist"

if [[ "$(uname -s)" != "Darwin" ]]; then
    echo "make_dmg.sh: a DMG is made on macOS (hdiutil, codesign); this is $(uname -s)." >&2
    exit 2
fi
if [[ ! -d "$APP" ]]; then
    echo "make_dmg.sh: no app bundle at $APP; run \`make package\` first." >&2
    exit 2
fi

VERSION="$(/usr/libexec/PlistBuddy -c "Print :CFBundleShortVersionString" "$APP/Contents/Info.plist")"
DMG="dist/Draftlight-$VERSION.dmg"

# ---- sign the app (inside out, by --deep), with the hardened runtime notarization needs ----
if [[ -n "${MACOS_SIGN_IDENTITY:-}" ]]; then
    echo "Signing $APP as \"$MACOS_SIGN_IDENTITY\""
    codesign --deep --force --options runtime --timestamp \
        --entitlements "$ENTITLEMENTS" --sign "$MACOS_SIGN_IDENTITY" "$APP"
    codesign --verify --deep --strict --verbose=2 "$APP"
else
    echo "Not signing: MACOS_SIGN_IDENTITY is not set (the app keeps its ad-hoc signature)."
fi

# ---- the disk image: the app and a link to /Applications to drag it onto ----
STAGING="$(mktemp -d -t draftlight-dmg)"
trap 'rm -rf "$STAGING"' EXIT
ditto "$APP" "$STAGING/Draftlight.app"
ln -s /Applications "$STAGING/Applications"
rm -f "$DMG"
# hdiutil now and then fails with "Resource busy" on CI machines; a second try succeeds.
for attempt in 1 2 3; do
    if hdiutil create -srcfolder "$STAGING" -volname Draftlight -format UDZO -ov "$DMG"; then
        break
    fi
    [[ $attempt == 3 ]] && exit 1
    echo "hdiutil failed (attempt $attempt); trying again in 10 s"
    sleep 10
done

if [[ -n "${MACOS_SIGN_IDENTITY:-}" ]]; then
    codesign --force --timestamp --sign "$MACOS_SIGN_IDENTITY" "$DMG"
fi

# ---- notarize the DMG (which covers the app inside it) and staple the ticket to it ----
if [[ -z "${MACOS_SIGN_IDENTITY:-}" ]]; then
    echo "Not notarizing: the app is not signed."
elif [[ -z "${MACOS_NOTARY_APPLE_ID:-}" || -z "${MACOS_NOTARY_TEAM_ID:-}" || -z "${MACOS_NOTARY_PASSWORD:-}" ]]; then
    echo "Not notarizing: set MACOS_NOTARY_APPLE_ID, MACOS_NOTARY_TEAM_ID and MACOS_NOTARY_PASSWORD to notarize."
else
    echo "Notarizing $DMG (this waits for Apple's answer, usually a few minutes)"
    RESULT="$(xcrun notarytool submit "$DMG" \
        --apple-id "$MACOS_NOTARY_APPLE_ID" --team-id "$MACOS_NOTARY_TEAM_ID" \
        --password "$MACOS_NOTARY_PASSWORD" --wait --output-format json)"
    echo "$RESULT"
    STATUS="$(python3 -c 'import json, sys; print(json.load(sys.stdin)["status"])' <<<"$RESULT")"
    if [[ "$STATUS" != "Accepted" ]]; then
        ID="$(python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])' <<<"$RESULT")"
        echo "make_dmg.sh: notarization ended with status $STATUS; Apple's log follows." >&2
        xcrun notarytool log "$ID" --apple-id "$MACOS_NOTARY_APPLE_ID" \
            --team-id "$MACOS_NOTARY_TEAM_ID" --password "$MACOS_NOTARY_PASSWORD" >&2 || true
        exit 1
    fi
    xcrun stapler staple "$DMG"
    xcrun stapler validate "$DMG"
fi

echo "Wrote $DMG ($(du -h "$DMG" | cut -f1))"
